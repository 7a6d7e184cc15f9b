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
}

type waitKey struct{}

// wait is what one connection was last told.
type wait struct {
	mu        sync.Mutex
	auth      string    // the Authorization of the refused call
	toldAt    time.Time // when that refusal was answered
	notBefore time.Time // and the time it named
	early     int       // early calls in a row
	holding   bool      // Max was passed: early calls are held
}

// arrive counts a call that starts at now and returns how long to hold it.
func (s *wait) arrive(now time.Time, auth string, b RetryAfter) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != s.auth || s.toldAt.IsZero() || !now.After(s.toldAt) {
		return 0
	}
	if !now.Before(s.notBefore) {
		s.early = 0
		return 0
	}
	s.early++
	if s.early > b.Max {
		s.holding = true
	}
	if !s.holding {
		return 0
	}
	return min(s.notBefore.Sub(now), b.MaxHold)
}

// answered notes an answer that told the client to wait.
func (s *wait) answered(now time.Time, auth string, retryAfter string) {
	secs, err := strconv.Atoi(retryAfter)
	if err != nil || secs <= 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if auth != s.auth {
		s.auth, s.early, s.holding = auth, 0, false
	}
	s.toldAt, s.notBefore = now, now.Add(time.Duration(secs)*time.Second)
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
		if hold := s.arrive(time.Now(), auth, b); hold > 0 && !b.hold(r, hold) {
			return
		}
		next.ServeHTTP(w, r)
		if ra := w.Header().Get("Retry-After"); ra != "" {
			s.answered(time.Now(), auth, ra)
		}
	})
}

// hold holds a call for d; false if its client left meanwhile (or reset
// the stream): nothing to answer. (Apart from Wrap's handler, whose frame
// stays on an open stream's stack: see proxy.Proxy.ServeHTTP.)
//
//go:noinline
func (b RetryAfter) hold(r *http.Request, d time.Duration) bool {
	if b.OnHold != nil {
		b.OnHold()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}
