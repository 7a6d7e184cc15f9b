package identity

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// DefaultRoleClaims are Keycloak's places for roles: realm roles, and the
// client roles of the API's own client (the configured audience).
//
// Not the roles of the client the token was issued to
// ("resource_access.${azp}.roles"): whoever administers any client of the
// realm can give that client a role named svc-admin, so reading roles there
// lets every client owner make themselves an installation-wide admin.
var DefaultRoleClaims = []string{"realm_access.roles", "resource_access.${audience}.roles"}

// DefaultPlanClaim names the claim that carries a subject's plan.
const DefaultPlanClaim = "plan"

// principalFromClaims maps decoded JWT claims to a Principal. roleClaims are
// dotted paths to string arrays (or space-separated strings); "${audience}"
// in a path stands for audience, and "${azp}" for the token's azp claim. A
// path naming ${audience} reads nothing when audience is empty.
func principalFromClaims(c map[string]any, roleClaims []string, planClaim, audience string) Principal {
	p := Principal{
		Subject:  str(c["sub"]),
		Username: str(c["preferred_username"]),
		Name:     str(c["name"]),
		ClientID: str(c["azp"]),
		Plan:     strings.ToLower(str(c[planClaim])),
	}
	if v, _ := c["email_verified"].(bool); v {
		p.Email = strings.ToLower(str(c["email"]))
	}
	for _, path := range roleClaims {
		if strings.Contains(path, "${audience}") {
			if audience == "" {
				continue
			}
			path = strings.ReplaceAll(path, "${audience}", audience)
		}
		path = strings.ReplaceAll(path, "${azp}", p.ClientID)
		p.Roles = append(p.Roles, stringsAt(c, strings.Split(path, "."))...)
	}
	slices.Sort(p.Roles)
	p.Roles = slices.Compact(p.Roles)
	return p
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

// stringsAt walks a path of object keys and returns the strings found there.
func stringsAt(v any, path []string) []string {
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	switch t := v.(type) {
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	case string:
		return strings.Fields(t)
	}
	return nil
}

// SubjectHash names a subject in logs and operator answers without naming
// it: the first 6 bytes of its SHA-256, in hex.
func SubjectHash(sub string) string {
	h := sha256.Sum256([]byte(sub))
	return hex.EncodeToString(h[:6])
}

// Hash is SubjectHash of the principal's subject, made once per token
// when there is one (SumSubject).
func (p *Principal) Hash() string {
	if p.hash != "" {
		return p.hash
	}
	if p.SubjectSum == ([32]byte{}) {
		return SubjectHash(p.Subject)
	}
	return hex.EncodeToString(p.SubjectSum[:6])
}

// notBeforeLeeway is the tolerance on nbf: go-oidc's, five minutes, which
// other OpenID Connect libraries use too.
const notBeforeLeeway = 5 * time.Minute

// standardClaims are the registered claims the Verifier checks.
type standardClaims struct {
	issuer    string
	audience  []string
	expiry    time.Time // zero when the token has none: expired
	notBefore time.Time // zero when the token has none
}

// standardClaimsOf reads the registered claims from a token's decoded
// claims, with go-oidc's types: iss a string, aud a string or a list of
// strings, exp, iat and nbf numbers of seconds. A claim of another type
// makes the token invalid.
func standardClaimsOf(c map[string]any) (standardClaims, error) {
	var s standardClaims
	var ok bool
	if v, present := c["iss"]; present {
		if s.issuer, ok = v.(string); !ok {
			return s, errors.New("claim iss is not a string")
		}
	}
	switch aud := c["aud"].(type) {
	case nil:
	case string:
		s.audience = []string{aud}
	case []any:
		s.audience = make([]string, len(aud))
		for i, a := range aud {
			if s.audience[i], ok = a.(string); !ok {
				return s, errors.New("claim aud is not a string or a list of strings")
			}
		}
	default:
		return s, errors.New("claim aud is not a string or a list of strings")
	}
	for _, name := range [...]string{"exp", "iat", "nbf"} {
		v, present := c[name]
		if !present || v == nil && name == "nbf" { // go-oidc: a null nbf is none
			continue
		}
		t, ok := numericDate(v)
		if !ok {
			return s, fmt.Errorf("claim %s is not a number", name)
		}
		switch name {
		case "exp":
			s.expiry = t
		case "nbf":
			s.notBefore = t
		}
	}
	return s, nil
}

// numericDate reads a time in seconds as go-oidc does: a JSON number, or a
// string holding one (encoding/json's json.Number accepts both), its
// fraction dropped.
func numericDate(v any) (time.Time, bool) {
	switch n := v.(type) {
	case float64:
		return time.Unix(int64(n), 0), true
	case string:
		if n == "" || !(n[0] == '-' || '0' <= n[0] && n[0] <= '9') || n[len(n)-1] < '0' || n[len(n)-1] > '9' || !json.Valid([]byte(n)) {
			return time.Time{}, false
		}
		if i, err := strconv.ParseInt(n, 10, 64); err == nil {
			return time.Unix(i, 0), true
		}
		f, err := strconv.ParseFloat(n, 64)
		if err != nil {
			return time.Time{}, false
		}
		return time.Unix(int64(f), 0), true
	}
	return time.Time{}, false
}
