package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
	"golang.org/x/sync/singleflight"
)

// Config configures a Verifier.
type Config struct {
	// IssuerURL is the OIDC issuer; discovery is read from
	// IssuerURL + "/.well-known/openid-configuration". Required.
	IssuerURL string
	// Audience is the API's own client id at the issuer: a token must name
	// it in aud. Required unless AllowAnyAudience. It also stands for
	// "${audience}" in RoleClaims.
	Audience string
	// AllowAnyAudience accepts tokens whatever their audience: tokens minted
	// for any client of the issuer. For development only; excludes Audience.
	AllowAnyAudience bool
	// AzpAsAudience also accepts a token whose azp (the client it was issued
	// to) is Audience, whatever its aud: for issuers that do not put the
	// API's own client in aud when the API gets a token for itself.
	AzpAsAudience bool
	// ClockSkew is the tolerance on exp. Default 30s.
	ClockSkew time.Duration
	// RoleClaims are the claim paths holding roles. Default DefaultRoleClaims.
	RoleClaims []string
	// PlanClaim names the plan claim. Default DefaultPlanClaim.
	PlanClaim string
	// HTTPTimeout bounds each discovery and JWKS request. Default 5s.
	HTTPTimeout time.Duration
	// KeyRefetchInterval is the least time between two fetches of the
	// issuer's keys: a token signed with an unknown key id makes the
	// verifier fetch them again only once that long has passed since the
	// last fetch, so that forged tokens cannot make it hammer the issuer.
	// Default DefaultKeyRefetchInterval.
	KeyRefetchInterval time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// AsymmetricAlgorithms are the signature algorithms a token may use: never
// HMAC (whose key would be the client secret) and never "none".
var AsymmetricAlgorithms = []string{
	oidc.RS256, oidc.RS384, oidc.RS512,
	oidc.ES256, oidc.ES384, oidc.ES512,
	oidc.PS256, oidc.PS384, oidc.PS512,
	oidc.EdDSA,
}

// DefaultKeyRefetchInterval is the default of Config.KeyRefetchInterval: a
// rotated key is accepted at most this long after its first token arrives.
const DefaultKeyRefetchInterval = 10 * time.Second

// rediscoverEvery bounds how often a failed discovery is retried.
const rediscoverEvery = 2 * time.Second

// Verifier verifies access tokens against one issuer. Discovery happens on
// first use (or first readiness probe), detached from the call that asked
// for it, and is retried (at most every couple of seconds) until it
// succeeds, so that a service can start before its identity provider.
// Signing keys are cached; a token signed with an unknown key id makes the
// verifier fetch the JWKS again (at most once per KeyRefetchInterval), so a
// rotated key is accepted without restart.
type Verifier struct {
	cfg    Config
	client *http.Client

	discovery singleflight.Group

	mu      sync.Mutex
	keys    *keySet // nil until discovery succeeds
	lastTry time.Time
	lastErr error
}

// NewVerifier checks cfg and returns a Verifier. It does not contact the issuer.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.IssuerURL == "" {
		return nil, errors.New("identity: issuer URL is required")
	}
	switch {
	case cfg.Audience == "" && !cfg.AllowAnyAudience:
		return nil, errors.New("identity: audience is required: the API's client id at the issuer (AllowAnyAudience accepts tokens for any client, for development only)")
	case cfg.Audience != "" && cfg.AllowAnyAudience:
		return nil, errors.New("identity: audience and AllowAnyAudience exclude each other")
	case cfg.AzpAsAudience && cfg.Audience == "":
		return nil, errors.New("identity: AzpAsAudience needs an audience")
	}
	if cfg.ClockSkew == 0 {
		cfg.ClockSkew = 30 * time.Second
	}
	if cfg.ClockSkew < 0 || cfg.ClockSkew > 5*time.Minute {
		return nil, fmt.Errorf("identity: clock skew %v out of range 0..5m", cfg.ClockSkew)
	}
	if len(cfg.RoleClaims) == 0 {
		cfg.RoleClaims = DefaultRoleClaims
	}
	if cfg.PlanClaim == "" {
		cfg.PlanClaim = DefaultPlanClaim
	}
	if cfg.HTTPTimeout == 0 {
		cfg.HTTPTimeout = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.KeyRefetchInterval == 0 {
		cfg.KeyRefetchInterval = DefaultKeyRefetchInterval
	}
	if cfg.KeyRefetchInterval < 0 {
		return nil, fmt.Errorf("identity: key refetch interval %v is negative", cfg.KeyRefetchInterval)
	}
	return &Verifier{cfg: cfg, client: &http.Client{Timeout: cfg.HTTPTimeout}}, nil
}

// Ready reports whether discovery and the first fetch of the issuer's keys
// have succeeded, trying them if they have not: a service that is ready
// can verify a token without waiting for the identity provider.
func (v *Verifier) Ready(ctx context.Context) error {
	k, err := v.keySet(ctx)
	if err != nil {
		return err
	}
	return k.ready(ctx)
}

// keySet returns the key set of the discovered issuer, discovering
// it if need be. Discovery serves every caller, not the one that happens
// to come first: it runs once at a time (singleflight), to a deadline of
// its own (Config.HTTPTimeout) whatever becomes of ctx, and only its own
// failure is remembered. A caller whose ctx ends first stops waiting; the
// discovery goes on for the others.
func (v *Verifier) keySet(ctx context.Context) (*keySet, error) {
	v.mu.Lock()
	k, lastErr, lastTry := v.keys, v.lastErr, v.lastTry
	v.mu.Unlock()
	if k != nil {
		return k, nil
	}
	if lastErr != nil && v.cfg.Now().Sub(lastTry) < rediscoverEvery {
		return nil, lastErr
	}
	detached := context.WithoutCancel(ctx)
	ch := v.discovery.DoChan("", func() (any, error) { return v.discover(detached) })
	select {
	case res := <-ch:
		if res.Err != nil {
			return nil, res.Err
		}
		return res.Val.(*keySet), nil
	case <-ctx.Done():
		return nil, fmt.Errorf("identity: waiting for discovery at %s: %w", v.cfg.IssuerURL, context.Cause(ctx))
	}
}

// discover reads the issuer's discovery document, to its own deadline.
func (v *Verifier) discover(ctx context.Context) (*keySet, error) {
	v.mu.Lock()
	if v.keys != nil { // a flight that ended just before this one began
		defer v.mu.Unlock()
		return v.keys, nil
	}
	v.lastTry = v.cfg.Now()
	v.mu.Unlock()
	fail := func(err error) (*keySet, error) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.lastErr = err
		return nil, err
	}
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), v.cfg.HTTPTimeout)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, v.cfg.IssuerURL)
	if err != nil {
		return fail(fmt.Errorf("identity: discovery at %s: %w", v.cfg.IssuerURL, err))
	}
	var meta struct {
		JWKSURI string `json:"jwks_uri"`
	}
	if err := provider.Claims(&meta); err != nil || meta.JWKSURI == "" {
		return fail(fmt.Errorf("identity: discovery at %s names no jwks_uri", v.cfg.IssuerURL))
	}
	algs := make([]jose.SignatureAlgorithm, len(AsymmetricAlgorithms))
	for i, a := range AsymmetricAlgorithms {
		algs[i] = jose.SignatureAlgorithm(a)
	}
	keys := &keySet{
		url: meta.JWKSURI, client: v.client, timeout: v.cfg.HTTPTimeout,
		refetchEvery: v.cfg.KeyRefetchInterval, algs: algs, now: v.cfg.Now,
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	v.keys, v.lastErr = keys, nil
	return keys, nil
}

// Verify checks the token's signature, issuer, expiry, type and audience,
// and returns its principal. Errors are *Error with a reason.
//
// The token is parsed once: its signature is checked by the key set, and
// its claims are decoded once, into the map the principal is read from.
// The checks are go-oidc's IDTokenVerifier's (issuer, exp with the clock
// skew, nbf with five minutes' leeway, the types of iss, aud, exp, iat and
// nbf), which parsed the token twice and its claims twice more.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	keys, err := v.keySet(ctx)
	if err != nil {
		// The caller's token may be fine; the issuer is not reachable.
		return Principal{}, &Error{Reason: ReasonIssuerUnavailable, Message: "token cannot be verified now: identity provider unreachable", Err: err, Retryable: true}
	}
	payload, headerType, err := keys.verifySignature(ctx, raw)
	switch {
	case err == nil:
	case errors.Is(err, errKeysFetch):
		return Principal{}, &Error{Reason: ReasonIssuerUnavailable, Message: "token cannot be verified now: the identity provider's keys are unreachable", Err: err, Retryable: true}
	case errors.Is(err, errKeyNotKnownYet), errors.Is(err, errUnknownKey):
		// Retryable: the issuer may publish the key later (or a cache in
		// front of it may have served old keys); such a refusal costs no
		// signature check, so there is nothing to save by remembering it.
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token: signed with an unknown key", Err: err, Retryable: true}
	default:
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: err}
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token claims", Err: err}
	}
	std, err := standardClaimsOf(claims)
	if err != nil {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: err}
	}
	if std.issuer != v.cfg.IssuerURL {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: fmt.Errorf("token issued by a different provider, expected %q got %q", v.cfg.IssuerURL, std.issuer)}
	}
	now := v.cfg.Now().Add(-v.cfg.ClockSkew)
	if std.expiry.Before(now) {
		return Principal{}, &Error{Reason: ReasonTokenExpired, Message: "token expired at " + std.expiry.UTC().Format(time.RFC3339)}
	}
	if !std.notBefore.IsZero() && now.Add(notBeforeLeeway).Before(std.notBefore) {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: fmt.Errorf("current time %v before the nbf (not before) time: %v", now, std.notBefore)}
	}
	if err := checkAccessToken(headerType, claims); err != nil {
		return Principal{}, err
	}
	p := principalFromClaims(claims, v.cfg.RoleClaims, v.cfg.PlanClaim, v.cfg.Audience)
	p.Expiry = std.expiry
	if p.Subject == "" {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "token has no sub claim"}
	}
	if a := v.cfg.Audience; a != "" && !slices.Contains(std.audience, a) && !(v.cfg.AzpAsAudience && p.ClientID == a) {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: fmt.Sprintf("token is not for audience %q", a)}
	}
	return p, nil
}

// KeyFetches returns how many times the issuer's keys were fetched since
// start, successfully or not.
func (v *Verifier) KeyFetches() uint64 {
	v.mu.Lock()
	k := v.keys
	v.mu.Unlock()
	if k == nil {
		return 0
	}
	return k.Fetches()
}

// Authenticate reads the bearer token from h and verifies it.
func (v *Verifier) Authenticate(ctx context.Context, h http.Header) (Principal, error) {
	raw, err := BearerToken(h)
	if err != nil {
		return Principal{}, err
	}
	p, err := v.Verify(ctx, raw)
	if err != nil {
		return Principal{}, errAsIdentity(err)
	}
	return p, nil
}
