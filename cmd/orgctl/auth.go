package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"
)

// refreshMargin: a stored access token that expires within this margin is
// refreshed before a call, so that it cannot expire on its way to the API.
const refreshMargin = 10 * time.Second

// loginScopes are the scopes login asks for: an ID token (who logged in) and
// the profile claims the API reads.
var loginScopes = []string{oidc.ScopeOpenID, "profile", "email"}

// session is what login stores for a context: the tokens, and who and where
// they are for. It is written owner-only and never printed.
type session struct {
	Issuer       string    `json:"issuer"`
	ClientID     string    `json:"clientId"`
	Subject      string    `json:"subject"`
	Username     string    `json:"username"`
	AccessToken  string    `json:"accessToken"`
	RefreshToken string    `json:"refreshToken,omitempty"`
	Expiry       time.Time `json:"expiry"`
}

// sessionPath is the token file of a context.
func (s *settings) sessionPath() string {
	return filepath.Join(s.dirs.tokens, s.contextName+".json")
}

// loadSession reads the context's session. It is an authError when there is
// none, or when it was made for another issuer or client than the context
// now names.
func (s *settings) loadSession() (*session, error) {
	data, err := os.ReadFile(s.sessionPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, &authError{msg: fmt.Sprintf("not logged in to context %q: run orgctl login", s.contextName)}
	}
	if err != nil {
		return nil, fmt.Errorf("read session: %w", err)
	}
	var sess session
	if err := json.Unmarshal(data, &sess); err != nil {
		return nil, &authError{msg: fmt.Sprintf("the session file %s is damaged: run orgctl login", s.sessionPath())}
	}
	if sess.Issuer != s.Issuer || sess.ClientID != s.ClientID {
		return nil, &authError{msg: fmt.Sprintf("the session of context %q is for issuer %s and client %s, not %s and %s: run orgctl login",
			s.contextName, sess.Issuer, sess.ClientID, s.Issuer, s.ClientID)}
	}
	return &sess, nil
}

// saveSession writes the session owner-only (directory 0700, file 0600).
func (s *settings) saveSession(sess *session) error {
	if err := os.MkdirAll(s.dirs.tokens, 0o700); err != nil {
		return fmt.Errorf("create token directory: %w", err)
	}
	// MkdirAll leaves an existing directory's mode alone.
	if err := os.Chmod(s.dirs.tokens, 0o700); err != nil {
		return fmt.Errorf("token directory: %w", err)
	}
	data, err := json.MarshalIndent(sess, "", "  ")
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	return writeFileAtomic(s.sessionPath(), data, 0o600)
}

// endpoint is the provider's endpoint with the client authenticating in
// the form, as the specification writes the token requests.
func endpoint(p *oidc.Provider) oauth2.Endpoint {
	ep := p.Endpoint()
	ep.AuthStyle = oauth2.AuthStyleInParams
	return ep
}

// login runs the device authorization grant (RFC 8628) and stores the
// session. Prompts go to w (stderr): stdout stays for results.
func login(ctx context.Context, s *settings, hc *http.Client, w io.Writer, browser bool) error {
	if s.clientSecret != "" {
		return usageErrorf("login is for people; with a client secret (a service account) every command gets a new token and no login is needed")
	}
	if s.ClientID == "" {
		return usageErrorf("no client id: give --client-id, set %s, or set it in the context", envClientID)
	}
	p, err := discover(ctx, hc, s.Issuer)
	if err != nil {
		return err
	}
	ep := endpoint(p)
	if ep.DeviceAuthURL == "" {
		return fmt.Errorf("the issuer %s advertises no device_authorization_endpoint: enable the OAuth 2.0 device authorization grant for client %s", s.Issuer, s.ClientID)
	}
	cfg := &oauth2.Config{ClientID: s.ClientID, Endpoint: ep, Scopes: loginScopes}
	octx := context.WithValue(ctx, oauth2.HTTPClient, hc)
	da, err := cfg.DeviceAuth(octx)
	if err != nil {
		return tokenEndpointError("device authorization", s, err)
	}
	link := da.VerificationURIComplete
	if link == "" {
		link = da.VerificationURI
	}
	fmt.Fprintf(w, "To log in to %s, open this page in a browser:\n\n  %s\n\nand check that it shows the code %s.\n", s.contextName, link, da.UserCode)
	if !da.Expiry.IsZero() {
		fmt.Fprintf(w, "Waiting for approval (the code expires in %s; Ctrl-C cancels)...\n", humanDuration(time.Until(da.Expiry)))
	}
	if browser {
		if err := openBrowser(link); err != nil {
			fmt.Fprintf(w, "(could not open a browser: %v)\n", err)
		}
	}
	tok, err := cfg.DeviceAccessToken(octx, da)
	if err != nil {
		return tokenEndpointError("login", s, err)
	}
	sess, err := newSession(ctx, p, s, tok, nil)
	if err != nil {
		return err
	}
	if err := s.saveSession(sess); err != nil {
		return err
	}
	fmt.Fprintf(w, "Logged in to %s as %s.\n", s.contextName, sess.Username)
	return nil
}

// newSession makes a session of a token response. The ID token, when the
// issuer sent one, is verified and says who logged in; prev is the session
// a refresh replaces.
func newSession(ctx context.Context, p *oidc.Provider, s *settings, tok *oauth2.Token, prev *session) (*session, error) {
	sess := &session{Issuer: s.Issuer, ClientID: s.ClientID, AccessToken: tok.AccessToken, RefreshToken: tok.RefreshToken, Expiry: tok.Expiry}
	if prev != nil {
		sess.Subject, sess.Username = prev.Subject, prev.Username
	}
	if raw, _ := tok.Extra("id_token").(string); raw != "" {
		idt, err := p.Verifier(&oidc.Config{ClientID: s.ClientID}).Verify(ctx, raw)
		if err != nil {
			return nil, &authError{msg: "the issuer's ID token does not verify", err: err}
		}
		var c struct {
			Username string `json:"preferred_username"`
			Email    string `json:"email"`
		}
		_ = idt.Claims(&c) // absent claims stay empty
		sess.Subject, sess.Username = idt.Subject, first(c.Username, c.Email, idt.Subject)
	}
	if sess.Username == "" {
		sess.Username = "(unknown user)"
	}
	return sess, nil
}

// tokenEndpointError words a refusal of the issuer for a person.
func tokenEndpointError(what string, s *settings, err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch re.ErrorCode {
	case "access_denied":
		return &authError{msg: what + ": the request was denied on the approval page"}
	case "expired_token":
		return &authError{msg: what + ": the code expired before it was approved: run orgctl login again"}
	case "invalid_grant":
		return &authError{msg: fmt.Sprintf("%s: the session of context %q has expired or was revoked (%s): run orgctl login", what, s.contextName, re.ErrorDescription)}
	case "unauthorized_client", "invalid_client":
		return &authError{msg: fmt.Sprintf("%s: the issuer refused client %s (%s: %s)", what, s.ClientID, re.ErrorCode, re.ErrorDescription)}
	case "":
		return &authError{msg: fmt.Sprintf("%s: the issuer answered HTTP %d", what, re.Response.StatusCode)}
	default:
		return &authError{msg: fmt.Sprintf("%s: %s: %s", what, re.ErrorCode, re.ErrorDescription)}
	}
}

// tokenSource returns what every call of this command gets its token from:
// client credentials when a client secret is set (a new token for this
// command, kept in memory only), the stored session otherwise. Both start
// at the first call, so that a mistake in the command line is told first.
func tokenSource(ctx context.Context, s *settings, hc *http.Client) (oauth2.TokenSource, error) {
	if s.clientSecret != "" {
		return &serviceAccountSource{ctx: ctx, s: s, hc: hc}, nil
	}
	return &sessionSource{ctx: ctx, s: s, hc: hc}, nil
}

// sessionSource gives the session's access token, refreshed (and stored)
// first when it expires within refreshMargin.
type sessionSource struct {
	ctx  context.Context
	s    *settings
	hc   *http.Client
	mu   sync.Mutex
	sess *session // nil until the first call
}

func (src *sessionSource) Token() (*oauth2.Token, error) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if err := src.load(); err != nil {
		return nil, err
	}
	if time.Until(src.sess.Expiry) > refreshMargin {
		return src.token(), nil
	}
	if src.sess.RefreshToken == "" {
		return nil, &authError{msg: fmt.Sprintf("the token of context %q has expired and there is no refresh token: run orgctl login", src.s.contextName)}
	}
	if err := src.refresh(); err != nil {
		return nil, err
	}
	return src.token(), nil
}

// refreshRefused refreshes the session although its token has not expired:
// the API refused it (the issuer rotated its keys, an edge restarted with
// other keys). gcloud and kubectl's OIDC helpers do the same before asking
// the person to log in again.
func (src *sessionSource) refreshRefused() error {
	src.mu.Lock()
	defer src.mu.Unlock()
	if err := src.load(); err != nil {
		return err
	}
	if src.sess.RefreshToken == "" {
		return &authError{msg: fmt.Sprintf("the API refused the token of context %q and there is no refresh token: run orgctl login", src.s.contextName)}
	}
	return src.refresh()
}

// load reads the session on first use. The caller holds mu.
func (src *sessionSource) load() error {
	if src.sess != nil {
		return nil
	}
	sess, err := src.s.loadSession()
	if err != nil {
		return err
	}
	src.sess = sess
	return nil
}

func (src *sessionSource) token() *oauth2.Token {
	return &oauth2.Token{AccessToken: src.sess.AccessToken, TokenType: "Bearer", Expiry: src.sess.Expiry}
}

// refresh gets new tokens with the refresh token and stores them. The
// caller holds mu.
func (src *sessionSource) refresh() error {
	p, err := discover(src.ctx, src.hc, src.s.Issuer)
	if err != nil {
		return err
	}
	cfg := &oauth2.Config{ClientID: src.s.ClientID, Endpoint: endpoint(p), Scopes: loginScopes}
	octx := context.WithValue(src.ctx, oauth2.HTTPClient, src.hc)
	// A token with only the refresh token makes the source refresh at once.
	tok, err := cfg.TokenSource(octx, &oauth2.Token{RefreshToken: src.sess.RefreshToken}).Token()
	if err != nil {
		return tokenEndpointError("refresh", src.s, err)
	}
	sess, err := newSession(src.ctx, p, src.s, tok, src.sess)
	if err != nil {
		return err
	}
	if err := src.s.saveSession(sess); err != nil {
		return err
	}
	src.sess = sess
	return nil
}

// serviceAccountSource gets a token with the client credentials grant on
// first use and keeps it for the rest of the command, in memory.
type serviceAccountSource struct {
	ctx  context.Context
	s    *settings
	hc   *http.Client
	mu   sync.Mutex
	from oauth2.TokenSource
}

func (src *serviceAccountSource) Token() (*oauth2.Token, error) {
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.from == nil {
		if src.s.ClientID == "" {
			return nil, usageErrorf("a client secret without a client id: give --client-id or set %s", envClientID)
		}
		p, err := discover(src.ctx, src.hc, src.s.Issuer)
		if err != nil {
			return nil, err
		}
		cc := &clientcredentials.Config{ClientID: src.s.ClientID, ClientSecret: src.s.clientSecret, TokenURL: p.Endpoint().TokenURL, AuthStyle: oauth2.AuthStyleInParams}
		src.from = cc.TokenSource(context.WithValue(src.ctx, oauth2.HTTPClient, src.hc))
	}
	tok, err := src.from.Token()
	if err != nil {
		return nil, tokenEndpointError("client credentials", src.s, err)
	}
	return tok, nil
}

// openBrowser opens url with the desktop's opener, if there is one.
func openBrowser(url string) error {
	var name string
	var args []string
	switch runtime.GOOS {
	case "darwin":
		name = "open"
	case "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler"}
	default:
		name = "xdg-open"
	}
	path, err := exec.LookPath(name)
	if err != nil {
		return fmt.Errorf("no %s", name)
	}
	cmd := exec.Command(path, append(args, url)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
