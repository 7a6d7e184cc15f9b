package devissuer

import (
	"crypto/rand"
	"html/template"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Paths of the device authorization grant (RFC 8628), as Keycloak serves
// them: the device authorization endpoint, and the page where a person
// enters the code and approves (Keycloak's verification_uri).
const (
	deviceAuthPath = "/protocol/openid-connect/auth/device"
	devicePagePath = "/device"
)

// grantDeviceCode is the device grant's grant_type at the token endpoint.
const grantDeviceCode = "urn:ietf:params:oauth:grant-type:device_code"

// maxPendingDevices bounds the device codes waiting for approval, so that a
// loop of authorization requests cannot fill memory.
const maxPendingDevices = 10000

// userCodeAlphabet has no vowels (no words) and no look-alike characters, as
// RFC 8628 section 6.1 suggests.
const userCodeAlphabet = "BCDFGHJKLMNPQRSTVWXZ"

// deviceGrant is one device authorization waiting for, or given, approval.
type deviceGrant struct {
	deviceCode string
	userCode   string // canonical: "BCDF-GHJK"
	clientID   string
	expires    time.Time
	interval   time.Duration // grows by 5s with each slow_down
	lastPoll   time.Time
	username   string // who approved; empty while pending
	denied     bool
}

// devices holds the pending device grants. They live in memory only: a
// restart of the issuer forgets them, like its keys.
type devices struct {
	mu       sync.Mutex
	byDevice map[string]*deviceGrant
	byUser   map[string]*deviceGrant
}

// add stores g, dropping expired grants first. It reports false when too
// many are pending.
func (d *devices) add(g *deviceGrant, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byDevice == nil {
		d.byDevice, d.byUser = make(map[string]*deviceGrant), make(map[string]*deviceGrant)
	}
	for _, old := range d.byDevice {
		if !now.Before(old.expires) {
			d.drop(old)
		}
	}
	if len(d.byDevice) >= maxPendingDevices {
		return false
	}
	if _, taken := d.byUser[g.userCode]; taken {
		return false // a collision in 20^8 codes; the client asks again
	}
	d.byDevice[g.deviceCode], d.byUser[g.userCode] = g, g
	return true
}

func (d *devices) drop(g *deviceGrant) {
	delete(d.byDevice, g.deviceCode)
	delete(d.byUser, g.userCode)
}

// decide records the person's answer for a user code. It reports false for
// an unknown or expired code.
func (d *devices) decide(userCode string, now time.Time, username string, approve bool) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.byUser[userCode]
	if !ok || !now.Before(g.expires) || g.username != "" || g.denied {
		return false
	}
	if approve {
		g.username = username
	} else {
		g.denied = true
	}
	return true
}

// pending reports whether a user code waits for approval.
func (d *devices) pending(userCode string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.byUser[userCode]
	return ok && now.Before(g.expires) && g.username == "" && !g.denied
}

// poll is one poll of the token endpoint by client with deviceCode. It
// returns the approving person's username, or the refusal to send. A poll
// sooner than half the interval after the previous one is slow_down and
// adds 5 seconds to the interval (RFC 8628 section 3.5); half, because a
// client polling on time can still arrive early after a delayed poll.
func (d *devices) poll(deviceCode, clientID string, now time.Time) (string, *oauthError) {
	d.mu.Lock()
	defer d.mu.Unlock()
	g, ok := d.byDevice[deviceCode]
	if !ok || g.clientID != clientID {
		return "", &oauthError{http.StatusBadRequest, "invalid_grant", "Device code not valid"}
	}
	if !now.Before(g.expires) {
		d.drop(g)
		return "", &oauthError{http.StatusBadRequest, "expired_token", "Device code is expired"}
	}
	last := g.lastPoll
	g.lastPoll = now
	switch {
	case g.denied:
		d.drop(g)
		return "", &oauthError{http.StatusBadRequest, "access_denied", "The end user denied the authorization request"}
	case g.username != "":
		d.drop(g)
		return g.username, nil
	case !last.IsZero() && now.Sub(last) < g.interval/2:
		g.interval += 5 * time.Second
		return "", &oauthError{http.StatusBadRequest, "slow_down", "Slow down"}
	default:
		return "", &oauthError{http.StatusBadRequest, "authorization_pending", "The authorization request is still pending"}
	}
}

// deviceAuthorizationResponse is RFC 8628 section 3.2's answer.
type deviceAuthorizationResponse struct {
	DeviceCode              string `json:"device_code"`
	UserCode                string `json:"user_code"`
	VerificationURI         string `json:"verification_uri"`
	VerificationURIComplete string `json:"verification_uri_complete"`
	ExpiresIn               int64  `json:"expires_in"`
	Interval                int64  `json:"interval"`
}

// serveDeviceAuthorization is the device authorization endpoint: a public
// client asks for a device code and a user code.
func (iss *Issuer) serveDeviceAuthorization(w http.ResponseWriter, r *http.Request) {
	form, oerr := readTokenForm(w, r)
	if oerr != nil {
		oerr.write(w)
		return
	}
	client, _, oerr := iss.authenticateClient(r, form)
	if oerr != nil {
		oerr.write(w)
		return
	}
	if !client.Public {
		errUnauthorizedClient(http.StatusBadRequest, "Client is not allowed to initiate OAuth 2.0 Device Authorization Grant. The flow is disabled for the client.").write(w)
		return
	}
	now := iss.cfg.Now()
	g := &deviceGrant{
		deviceCode: rand.Text(),
		userCode:   newUserCode(),
		clientID:   client.ID,
		expires:    now.Add(iss.cfg.DeviceCodeTTL),
		interval:   iss.cfg.DevicePollInterval,
	}
	if !iss.devices.add(g, now) {
		(&oauthError{http.StatusServiceUnavailable, "temporarily_unavailable", "Too many pending device authorizations"}).write(w)
		return
	}
	page := iss.url + devicePagePath
	w.Header().Set("Cache-Control", "no-store")
	writeJSON(w, http.StatusOK, deviceAuthorizationResponse{
		DeviceCode:              g.deviceCode,
		UserCode:                g.userCode,
		VerificationURI:         page,
		VerificationURIComplete: page + "?user_code=" + g.userCode,
		ExpiresIn:               int64(iss.cfg.DeviceCodeTTL / time.Second),
		Interval:                int64(iss.cfg.DevicePollInterval / time.Second),
	})
}

// newUserCode returns eight letters of userCodeAlphabet as "BCDF-GHJK".
func newUserCode() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	var s strings.Builder
	for i, c := range b {
		if i == 4 {
			s.WriteByte('-')
		}
		// 256 is not a multiple of 20: the first 16 letters come a little
		// more often, which costs a development issuer nothing.
		s.WriteByte(userCodeAlphabet[int(c)%len(userCodeAlphabet)])
	}
	return s.String()
}

// canonicalUserCode is what a person typed, upper-cased, with any dashes and
// spaces dropped and the dash put back in its place.
func canonicalUserCode(typed string) string {
	var s strings.Builder
	for _, r := range strings.ToUpper(typed) {
		if r != '-' && r != ' ' {
			s.WriteRune(r)
		}
	}
	c := s.String()
	if len(c) != 8 {
		return c
	}
	return c[:4] + "-" + c[4:]
}

// devicePage is the approval page: the code (filled in from the link), the
// person's username and password, and Approve or Deny.
var devicePage = template.Must(template.New("device").Parse(`<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Device login: {{.Realm}}</title></head>
<body>
<h1>Device login to realm {{.Realm}}</h1>
{{if .Message}}<p role="status">{{.Message}}</p>{{end}}
{{if not .Done}}
<form method="post" action="{{.Action}}">
<p><label>Code shown by your device <input name="user_code" value="{{.UserCode}}" autocomplete="off" required></label></p>
<p><label>Username <input name="username" autocomplete="username" required></label></p>
<p><label>Password <input name="password" type="password" autocomplete="current-password" required></label></p>
<p><button name="action" value="approve" type="submit">Approve</button>
<button name="action" value="deny" type="submit">Deny</button></p>
</form>
<p>Development users: alice/alice (free), bob/bob (pro), carol/carol (enterprise), and any free-&lt;x&gt;, pro-&lt;x&gt;, enterprise-&lt;x&gt; with password dev.</p>
{{end}}
</body>
</html>
`))

type devicePageData struct {
	Realm, Action, UserCode, Message string
	Done                             bool
}

func (iss *Issuer) writeDevicePage(w http.ResponseWriter, status int, d devicePageData) {
	d.Realm, d.Action = iss.cfg.Realm, iss.url+devicePagePath
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The page takes a password: no framing by other sites.
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Content-Security-Policy", "default-src 'none'; form-action 'self'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_ = devicePage.Execute(w, d)
}

// serveDevicePage shows the approval form, with the code of the link filled in.
func (iss *Issuer) serveDevicePage(w http.ResponseWriter, r *http.Request) {
	iss.writeDevicePage(w, http.StatusOK, devicePageData{UserCode: canonicalUserCode(r.URL.Query().Get("user_code"))})
}

// serveDeviceDecision takes the form: a known person approves or denies the
// device that shows the code.
func (iss *Issuer) serveDeviceDecision(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxTokenRequest)
	if err := r.ParseForm(); err != nil {
		iss.writeDevicePage(w, http.StatusBadRequest, devicePageData{Message: "Malformed form."})
		return
	}
	code := canonicalUserCode(r.PostForm.Get("user_code"))
	now := iss.cfg.Now()
	if !iss.devices.pending(code, now) {
		iss.writeDevicePage(w, http.StatusBadRequest, devicePageData{UserCode: code, Message: "Invalid code: it is unknown, expired or already used. Start the login on your device again."})
		return
	}
	u, ok := iss.user(r.PostForm.Get("username"))
	if !ok || !equalSecret(u.Password, r.PostForm.Get("password")) {
		iss.writeDevicePage(w, http.StatusUnauthorized, devicePageData{UserCode: code, Message: "Invalid username or password."})
		return
	}
	approve := r.PostForm.Get("action") != "deny"
	if !iss.devices.decide(code, now, u.Username, approve) {
		iss.writeDevicePage(w, http.StatusBadRequest, devicePageData{UserCode: code, Message: "Invalid code: it is unknown, expired or already used."})
		return
	}
	msg := "Device login approved for " + u.Username + ". You may close this window and return to your device."
	if !approve {
		msg = "Device login denied."
	}
	iss.writeDevicePage(w, http.StatusOK, devicePageData{Message: msg, Done: true})
}
