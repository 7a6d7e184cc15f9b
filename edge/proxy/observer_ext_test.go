package proxy_test

import (
	"context"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/orgedge/edge/edge/proxy"
)

// events records what a pool tells its Observer.
type events struct {
	mu  sync.Mutex
	got []string
}

func (ev *events) add(s string) { ev.mu.Lock(); ev.got = append(ev.got, s); ev.mu.Unlock() }

func (ev *events) has(s string) bool {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	return slices.Contains(ev.got, s)
}

func (ev *events) Backend(addr string) proxy.BackendObserver {
	ev.add("join " + addr)
	return backendEvents{ev, addr}
}

type backendEvents struct {
	ev   *events
	addr string
}

func (b backendEvents) Called(string, time.Duration) {}
func (b backendEvents) Ejected(r string)             { b.ev.add("ejected " + b.addr + " " + r) }
func (b backendEvents) EjectionOver()                {}
func (b backendEvents) Healthy(bool)                 {}
func (b backendEvents) Forget()                      { b.ev.add("forget " + b.addr) }

// addrs is a resolver whose answer a test changes.
type addrs struct{ v atomic.Pointer[[]string] }

func (a *addrs) LookupHost(context.Context, string) ([]string, error) { return *a.v.Load(), nil }

// A backend that DNS stops naming leaves the pool, and its Observer
// forgets it, so that its metric series go with it.
func TestPoolForgetsABackendThatLeaves(t *testing.T) {
	u, _ := url.Parse("http://orgsvc.test:8082")
	res := &addrs{}
	res.v.Store(&[]string{"127.0.0.1", "127.0.0.2"})
	ev := &events{}
	p := proxy.NewPool(proxy.PoolOptions{Upstreams: []*url.URL{u}, ResolveInterval: 5 * time.Millisecond, Resolver: res, Observer: ev})
	t.Cleanup(p.Close)
	wait := func(what string) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); !ev.has(what); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("no %q; events: %v", what, ev.got)
			}
		}
	}
	wait("join 127.0.0.2:8082")
	res.v.Store(&[]string{"127.0.0.1"})
	wait("forget 127.0.0.2:8082")
	if ev.has("forget 127.0.0.1:8082") {
		t.Errorf("a backend that stays was forgotten: %v", ev.got)
	}
}
