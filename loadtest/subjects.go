package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Subject is one caller the tool acts as. Its token never leaves the
// process: not in logs, reports or errors.
type Subject struct {
	Name string // username or client id
	// Plan is the plan the tool expects the edge to apply; "" until the
	// edge's GetUsage answer names it (for subjects named by -users or
	// -client-id without =plan).
	Plan string
	// Fresh is set for the development issuer's users generated for this
	// run, which no earlier run has used.
	Fresh bool

	src *tokenSource
}

// Token returns a valid access token.
func (s *Subject) Token() string { return s.src.current() }

// devUser names the development issuer's generated user number n of a
// plan for a run. The issuer knows plans free, pro and enterprise by the
// name's prefix; a user of any other plan is named as free, and the edge
// must put it on that plan itself (its default plan or subject_plans).
func devUser(plan string, n int, run string) string {
	prefix := plan
	switch plan {
	case "free", "pro", "enterprise":
	default:
		prefix = "free"
	}
	return fmt.Sprintf("%s-lt-%d-%s", prefix, n, run)
}

// newRunID returns a short id unique to the run, for names of subjects and
// created objects, so reruns within a day do not share limits.
func newRunID(now time.Time) string {
	var b [2]byte
	_, _ = rand.Read(b[:])
	return strconv.FormatInt(now.Unix(), 36) + hex.EncodeToString(b[:])
}

// tokenSource gets and renews one subject's token from the issuer's token
// endpoint.
type tokenSource struct {
	iss  *issuer
	form url.Values

	mu      sync.RWMutex
	token   string
	expires time.Time
	life    time.Duration
}

func (s *tokenSource) current() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.token
}

// fetch gets a new token.
func (s *tokenSource) fetch(ctx context.Context) error {
	tok, ttl, err := s.iss.token(ctx, s.form)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.token, s.expires, s.life = tok, time.Now().Add(ttl), ttl
	s.mu.Unlock()
	return nil
}

// stale reports whether the token has less than a fifth of its life, or two
// minutes, left.
func (s *tokenSource) stale(now time.Time) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.expires.Sub(now) < min(2*time.Minute, s.life/5)
}

// issuer is an OIDC issuer's token endpoint, found by discovery.
type issuer struct {
	url      string
	hc       *http.Client
	once     sync.Once
	endpoint string
	err      error
}

func newIssuer(issuerURL string) *issuer {
	return &issuer{url: strings.TrimSuffix(issuerURL, "/"), hc: &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 8},
	}}
}

func (i *issuer) close() { i.hc.CloseIdleConnections() }

// tokenEndpoint reads token_endpoint from the discovery document.
func (i *issuer) tokenEndpoint(ctx context.Context) (string, error) {
	i.once.Do(func() {
		var doc struct {
			TokenEndpoint string `json:"token_endpoint"`
		}
		i.err = i.getJSON(ctx, i.url+"/.well-known/openid-configuration", &doc)
		if i.err == nil && doc.TokenEndpoint == "" {
			i.err = errors.New("the discovery document has no token_endpoint")
		}
		if i.err != nil {
			i.err = fmt.Errorf("issuer %s: %w", i.url, i.err)
		}
		i.endpoint = doc.TokenEndpoint
	})
	return i.endpoint, i.err
}

func (i *issuer) getJSON(ctx context.Context, u string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	res, err := i.hc.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: HTTP %d", u, res.StatusCode)
	}
	return json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(v)
}

// token posts a grant to the token endpoint. Errors name the grant's
// subject but never a secret or a token.
func (i *issuer) token(ctx context.Context, form url.Values) (string, time.Duration, error) {
	endpoint, err := i.tokenEndpoint(ctx)
	if err != nil {
		return "", 0, err
	}
	who := form.Get("username")
	if who == "" {
		who = form.Get("client_id")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return "", 0, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	res, err := i.hc.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("token for %s: %w", who, err)
	}
	defer res.Body.Close()
	var body struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
		Error       string `json:"error"`
		Description string `json:"error_description"`
	}
	_ = json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&body)
	if res.StatusCode != http.StatusOK || body.AccessToken == "" {
		return "", 0, fmt.Errorf("token for %s (%s grant): HTTP %d %s %s", who, form.Get("grant_type"), res.StatusCode, body.Error, body.Description)
	}
	ttl := time.Duration(body.ExpiresIn) * time.Second
	if ttl <= 0 {
		ttl = 5 * time.Minute
	}
	return body.AccessToken, ttl, nil
}

// buildSubjects makes the run's subjects from the options: the named users
// or clients, or the development issuer's generated users per plan.
func buildSubjects(o *Options, iss *issuer, run string) []*Subject {
	var out []*Subject
	add := func(name, plan string, fresh bool, form url.Values) {
		out = append(out, &Subject{Name: name, Plan: plan, Fresh: fresh, src: &tokenSource{iss: iss, form: form}})
	}
	switch {
	case len(o.Users) > 0:
		for _, u := range o.Users {
			form := url.Values{"grant_type": {"password"}, "client_id": {o.ClientID}, "username": {u.Name}, "password": {o.Password}}
			if o.ClientSecret != "" {
				form.Set("client_secret", o.ClientSecret)
			}
			add(u.Name, u.Plan, false, form)
		}
	case len(o.Clients) > 0:
		for _, c := range o.Clients {
			add(c.Name, c.Plan, false, url.Values{"grant_type": {"client_credentials"}, "client_id": {c.Name}, "client_secret": {o.ClientSecret}})
		}
	default:
		for _, pc := range o.Subjects {
			for n := 1; n <= pc.Count; n++ {
				name := devUser(pc.Plan, n, run)
				add(name, pc.Plan, true, url.Values{"grant_type": {"password"}, "client_id": {o.ClientID}, "username": {name}, "password": {o.Password}})
			}
		}
	}
	return out
}

// fetchTokens gets every subject's first token, a few at a time.
func fetchTokens(ctx context.Context, subjects []*Subject) error {
	sem := make(chan struct{}, 8)
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	for i, s := range subjects {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = s.src.fetch(ctx)
		})
	}
	wg.Wait()
	return firstOf(errs)
}

// firstOf returns the first error, saying how many more there were: the
// same failure for every subject reads better once.
func firstOf(errs []error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if first == nil {
				first = err
			}
			n++
		}
	}
	if n > 1 {
		return fmt.Errorf("%w (and %d more subjects)", first, n-1)
	}
	return first
}

// renewTokens renews tokens about to expire until ctx ends, so that runs
// longer than a token's life keep calling with valid ones.
func renewTokens(ctx context.Context, subjects []*Subject) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			for _, s := range subjects {
				if s.src.stale(now) {
					_ = s.src.fetch(ctx) // the old token still works for a while; the next tick retries
				}
			}
		}
	}
}
