package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// wellKnown is where an issuer's discovery document is, below its URL
// (OpenID Connect Discovery 1.0, section 4).
const wellKnown = "/.well-known/openid-configuration"

// Bounds on reading the discovery document: a wrong URL may name a large
// page or a server that never answers.
const (
	discoveryTimeout = 30 * time.Second
	maxDiscovery     = 1 << 20
)

// errIssuerUnavailable is a discovery the issuer failed (HTTP 5xx): trying
// again may work.
var errIssuerUnavailable = errors.New("the issuer is unavailable")

// signingAlgs are the ID token algorithms go-oidc verifies (its
// NewProvider keeps only these of what a document lists).
var signingAlgs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// discover reads the issuer's discovery document. It does the request
// itself rather than through oidc.NewProvider, to bound the read and to
// tell a person what was asked and what a right issuer URL looks like.
func discover(ctx context.Context, hc *http.Client, issuer string) (*oidc.Provider, error) {
	if issuer == "" {
		return nil, usageErrorf("no issuer URL: give --issuer, set %s, or set it in the context", envIssuer)
	}
	docURL := issuer + wellKnown
	wrong := func(format string, a ...any) error {
		hints := []string{
			"The issuer URL is the realm's URL, whose discovery document is <issuer URL>" + wellKnown + ":",
			"e.g. https://id.example.com/realms/prod (Keycloak: https://HOST/realms/REALM; the development",
			"issuer: http://127.0.0.1:8081/realms/dev). Set it with --issuer, " + envIssuer + " or orgctl context set NAME --issuer URL.",
		}
		if base, ok := strings.CutSuffix(issuer, wellKnown); ok {
			hints = append([]string{"That URL is a discovery document's: the issuer URL is " + base + "."}, hints...)
		}
		return &configError{msg: fmt.Sprintf("OIDC discovery: "+format, a...), hints: hints}
	}

	rctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodGet, docURL, nil)
	if err != nil {
		return nil, wrong("the issuer URL %q is not a URL: %v", issuer, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("OIDC discovery at %s: %w", docURL, err) // a network error: exit 9
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxDiscovery+1))
	if err != nil {
		return nil, fmt.Errorf("OIDC discovery at %s: %w", docURL, err)
	}
	switch {
	case resp.StatusCode >= 500:
		return nil, fmt.Errorf("OIDC discovery at %s: HTTP %s: %w", docURL, resp.Status, errIssuerUnavailable)
	case resp.StatusCode != http.StatusOK:
		return nil, wrong("GET %s answered HTTP %s, not the issuer's discovery document", docURL, resp.Status)
	case len(body) > maxDiscovery:
		return nil, wrong("GET %s answered more than 1 MiB, not a discovery document", docURL)
	}
	var doc oidc.ProviderConfig
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err := json.Unmarshal(body, &doc); err != nil || doc.IssuerURL == "" || doc.TokenURL == "" || doc.JWKSURL == "" {
		return nil, wrong("GET %s answered %s, not a discovery document (JSON with issuer, token_endpoint, jwks_uri)", docURL, first(ct, "no content type"))
	}
	if doc.IssuerURL != issuer {
		return nil, wrong("the document at %s is issuer %s's, not %s's: tokens name it, so the issuer URL must be exactly %s", docURL, doc.IssuerURL, issuer, doc.IssuerURL)
	}
	doc.Algorithms = slices.DeleteFunc(doc.Algorithms, func(a string) bool { return !slices.Contains(signingAlgs, a) })
	return doc.NewProvider(oidc.ClientContext(ctx, hc)), nil
}
