package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Config configures a Verifier.
type Config struct {
	// IssuerURL is the OIDC issuer; discovery is read from
	// IssuerURL + "/.well-known/openid-configuration". Required.
	IssuerURL string
	// Audience, when set, must be in the token's aud or be its azp.
	Audience string
	// ClockSkew is the tolerance on exp. Default 30s.
	ClockSkew time.Duration
	// RoleClaims are the claim paths holding roles. Default DefaultRoleClaims.
	RoleClaims []string
	// PlanClaim names the plan claim. Default DefaultPlanClaim.
	PlanClaim string
	// HTTPTimeout bounds each discovery and JWKS request. Default 5s.
	HTTPTimeout time.Duration
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

// rediscoverEvery bounds how often a failed discovery is retried.
const rediscoverEvery = 2 * time.Second

// Verifier verifies access tokens against one issuer. Discovery happens on
// first use and is retried (at most every couple of seconds) until it
// succeeds, so that a service can start before its identity provider.
// Signing keys are cached; a token signed with an unknown key id makes the
// verifier fetch the JWKS again, so a rotated key is accepted without restart.
type Verifier struct {
	cfg    Config
	client *http.Client

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	lastTry  time.Time
	lastErr  error
}

// NewVerifier checks cfg and returns a Verifier. It does not contact the issuer.
func NewVerifier(cfg Config) (*Verifier, error) {
	if cfg.IssuerURL == "" {
		return nil, errors.New("identity: issuer URL is required")
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
	return &Verifier{cfg: cfg, client: &http.Client{Timeout: cfg.HTTPTimeout}}, nil
}

// Ready reports whether discovery has succeeded, trying it if it has not.
func (v *Verifier) Ready(ctx context.Context) error {
	_, err := v.oidcVerifier(ctx)
	return err
}

func (v *Verifier) oidcVerifier(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	if v.lastErr != nil && v.cfg.Now().Sub(v.lastTry) < rediscoverEvery {
		return nil, v.lastErr
	}
	v.lastTry = v.cfg.Now()
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, v.client), v.cfg.HTTPTimeout)
	defer cancel()
	provider, err := oidc.NewProvider(dctx, v.cfg.IssuerURL)
	if err != nil {
		v.lastErr = fmt.Errorf("identity: discovery at %s: %w", v.cfg.IssuerURL, err)
		return nil, v.lastErr
	}
	// The key set outlives this call: give it a context that is never
	// cancelled, carrying the bounded HTTP client.
	keyCtx := oidc.ClientContext(context.Background(), v.client)
	v.verifier = provider.VerifierContext(keyCtx, &oidc.Config{
		SkipClientIDCheck:    true, // audience is checked below, against aud or azp
		SupportedSigningAlgs: AsymmetricAlgorithms,
		Now:                  func() time.Time { return v.cfg.Now().Add(-v.cfg.ClockSkew) },
	})
	v.lastErr = nil
	return v.verifier, nil
}

// Verify checks the token's signature, issuer, expiry and audience, and
// returns its principal. Errors are *Error with a reason.
func (v *Verifier) Verify(ctx context.Context, raw string) (Principal, error) {
	ov, err := v.oidcVerifier(ctx)
	if err != nil {
		// The caller's token may be fine; the issuer is not reachable.
		return Principal{}, &Error{Reason: ReasonIssuerUnavailable, Message: "token cannot be verified now: identity provider unreachable", Err: err}
	}
	tok, err := ov.Verify(ctx, raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return Principal{}, &Error{Reason: ReasonTokenExpired, Message: "token expired at " + exp.Expiry.UTC().Format(time.RFC3339)}
		}
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token", Err: err}
	}
	var claims map[string]any
	if err := tok.Claims(&claims); err != nil {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "invalid token claims", Err: err}
	}
	p := principalFromClaims(claims, v.cfg.RoleClaims, v.cfg.PlanClaim)
	p.Expiry = tok.Expiry
	if p.Subject == "" {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: "token has no sub claim"}
	}
	if a := v.cfg.Audience; a != "" && !slices.Contains(tok.Audience, a) && p.ClientID != a {
		return Principal{}, &Error{Reason: ReasonTokenInvalid, Message: fmt.Sprintf("token is not for audience %q", a)}
	}
	return p, nil
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
