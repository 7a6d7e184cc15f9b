// Command bulkissuer is the development issuer (package devissuer) on its
// own, for benchmarks that need more subjects than its token endpoint can
// serve within a token's life (bench/bigsubjects.sh with a million): the
// password grant signs three tokens per call (access, ID and refresh: about
// 400 calls/s on 2 cores), and they live 10 minutes. This one's tokens live
// -ttl, and
//
//	GET /mint?prefix=P&n=N
//
// answers N access tokens, one per line, for the users P-0 … P-(N-1) (plan
// users: P starts with free-, pro- or enterprise-), each signed once, on
// every core. Everything else is the issuer itself (discovery, keys, the
// token endpoint) under http://ADDR/realms/dev.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"log"
	"net/http"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orgedge/edge/devissuer"
)

// maxMint bounds one /mint: the tokens are held by the caller.
const maxMint = 10_000_000

func main() {
	addr := flag.String("addr", "127.0.0.1:8091", "where to listen")
	ttl := flag.Duration("ttl", 3*time.Hour, "the tokens' lifetime")
	flag.Parse()
	cfg := devissuer.DefaultConfig()
	cfg.TokenTTL = *ttl
	iss, err := devissuer.New("http://"+*addr, cfg)
	if err != nil {
		log.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mint", func(w http.ResponseWriter, r *http.Request) { mint(iss, w, r) })
	mux.Handle("/", iss)
	srv := &http.Server{Addr: *addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Printf("bulkissuer: issuer %s, tokens live %v", iss.URL(), *ttl)
	log.Fatal(srv.ListenAndServe())
}

// mint writes n tokens, one per line, signed by one goroutine per core.
func mint(iss *devissuer.Issuer, w http.ResponseWriter, r *http.Request) {
	prefix := r.URL.Query().Get("prefix")
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n < 1 || n > maxMint {
		http.Error(w, fmt.Sprintf("n: a count from 1 to %d", maxMint), http.StatusBadRequest)
		return
	}
	if _, err := iss.ClaimsFor(prefix + "-0"); err != nil {
		http.Error(w, "prefix: "+err.Error(), http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	out := bufio.NewWriterSize(w, 1<<20)
	var (
		mu   sync.Mutex
		next atomic.Int64
	)
	g, ctx := errgroup.WithContext(r.Context())
	for range runtime.GOMAXPROCS(0) {
		g.Go(func() error {
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				if err := ctx.Err(); err != nil {
					return err
				}
				tok, err := iss.TokenFor(prefix + "-" + strconv.FormatInt(i, 10))
				if err != nil {
					return err
				}
				mu.Lock()
				_, _ = out.WriteString(tok)
				_ = out.WriteByte('\n')
				mu.Unlock()
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		// The status is out already: cut the answer short, so that the
		// caller sees fewer lines than it asked for.
		log.Printf("bulkissuer: mint: %v", err)
		return
	}
	_ = out.Flush()
}
