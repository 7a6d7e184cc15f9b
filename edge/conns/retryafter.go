package conns

import (
	"net/http"
	"strconv"
	"sync"
	"time"
)

// RetryAfter slows the clients that ignore Retry-After. Once an answer on
// a connection has told its client to wait (a Retry-After header of whole
// seconds: every rate-limit and quota refusal the edge writes, in every
// protocol but Connect streaming, whose error is in its body), each call
// the client starts on that connection with the same Authorization before
// the time is up is early. After Max early calls in a row, the
// connection's early calls are held: not served until the time the last
// refusal named (at most MaxHold), then served as any call. Over HTTP/1.1
// the connection is not read while its call is held; over HTTP/2 held
// streams cost a goroutine each, at most the connection's stream bound.
//
// A reload ends every hold and every run of early calls: the retry times
// were computed under the policy it replaced.
//
// A client that waits as told never meets it: its next call on the
// connection comes when the time is up, and a call that came early only
// because it was sent before the refusal was answered is not counted. Calls
// of another token on the same connection (a proxy in front carrying many
// clients) are not counted against one token's refusal.
type RetryAfter struct {
	// Max is how many early calls in a row a connection may make before
	// its early calls are held; 0: none is held.
	Max int
	// MaxHold bounds one hold (a daily limit's Retry-After is hours).
	MaxHold time.Duration
	// OnHold is called for each held call.
	OnHold func()
	// PolicyReplaced, when set, returns a channel closed when the limits in
	// force are next replaced (a reload). A refusal's retry time holds only
	// under the policy that computed it: once that policy is replaced (the
	// limit may have been raised), the calls held on it are served at once
	// and the run of early calls ends.
	PolicyReplaced func() <-chan struct{}
}

type waitKey struct{}

// wait is what one connection was last told.
type wait struct {
	mu        sync.Mutex
	auth      string          // the Authorization of the refused call
	toldAt    time.Time       // when that refusal was answered
	notBefore time.Time       // and the time it named
	early     int             // early calls in a row
	holding   bool            // Max was passed: early calls are held
	policy    <-chan struct{} // closed once the refusal's policy is replaced
}

// replaced reports whether c, if any, is closed.
func replaced(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// arrive counts a call that starts at now and returns how long to hold it,
// and the channel that ends the hold early (closed when the policy that
// refused is replaced).
func (s *wait) arrive(now time.Time, auth string, b RetryAfter) (time.Duration, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != s.auth || s.toldAt.IsZero() || !now.After(s.toldAt) {
		return 0, nil
	}
	if s.policy != nil && replaced(s.policy) {
		// The time no longer says anything: the client starts afresh.
		s.early, s.holding, s.toldAt = 0, false, time.Time{}
		return 0, nil
	}
	if !now.Before(s.notBefore) {
		s.early = 0
		return 0, nil
	}
	s.early++
	if s.early > b.Max {
		s.holding = true
	}
	if !s.holding {
		return 0, nil
	}
	return min(s.notBefore.Sub(now), b.MaxHold), s.policy
}

// answered notes an answer that told the client to wait, computed under
// the policy whose replacement closes policy (nil: not known).
func (s *wait) answered(now time.Time, auth string, retryAfter string, policy <-chan struct{}) {
	secs, err := strconv.Atoi(retryAfter)
	if err != nil || secs <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != s.auth || policy != s.policy {
		// Another client, or a refusal under another policy: a new run.
		s.auth, s.early, s.holding = auth, 0, false
	}
	s.toldAt, s.notBefore, s.policy = now, now.Add(time.Duration(secs)*time.Second), policy
}

// Wrap holds the early calls of connections past the bound.
func (b RetryAfter) Wrap(next http.Handler) http.Handler {
	if b.Max <= 0 {
		return next
	}
	if b.MaxHold <= 0 {
		b.MaxHold = time.Minute
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, _ := r.Context().Value(waitKey{}).(*wait)
		if s == nil {
			next.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		if hold, ended := s.arrive(time.Now(), auth, b); hold > 0 && !b.hold(r, hold, ended) {
			return
		}
		var policy <-chan struct{}
		if b.PolicyReplaced != nil {
			policy = b.PolicyReplaced() // the policy this call is decided under
		}
		next.ServeHTTP(w, r)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			s.answered(time.Now(), auth, ra, policy)
		}
	})
}

// hold holds a call for d, or until ended is closed; false if its client
// left meanwhile (or reset the stream): nothing to answer. (Apart from
// Wrap's handler, whose frame stays on an open stream's stack: see
// proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (b RetryAfter) hold(r *http.Request, d time.Duration, ended <-chan struct{}) bool {
	if b.OnHold != nil {
		b.OnHold()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ended: // nil (never) when the policy is not known
		return true
	case <-r.Context().Done():
		return false
	}
}
