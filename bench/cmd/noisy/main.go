// Command noisy measures what one flooding subject costs the others (issue
// 22, goal 1): 50 subjects make 500 calls/s in total, on an open model,
// while one free subject calls as fast as 16 connections allow, ignoring
// Retry-After. Phases alternate, in each round and for each edge named:
// quiet (the others alone), then flood (the others and the flooder). For
// each phase it reports the others' calls, errors, p50 and p99, the
// flooder's answers by status, and the edge process's CPU (from
// /proc/PID/stat); the summary gives, per edge, the medians over the
// rounds of the others' p99 with and without the flood and the edge's CPU
// per flooder answer (the flood phase's CPU less the quiet phase's, over
// the answers). bench/noisy.sh starts what it needs.
//
// It drives edges whose issuer is the development issuer (any
// enterprise-/free- user, password dev): tokens come from its token
// endpoint.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/orgedge/edge/devissuer"
)

// procedure is what every call asks for (-procedure), with the body {}.
var procedure = "/svc.v1.OrganizationService/ListOrganizations"

func main() {
	edges := flag.String("edges", "edge=http://127.0.0.1:18080", "NAME=URL,... the edges to measure, in turn")
	pids := flag.String("pids", "", "NAME=PID,... the edges' processes, for their CPU time")
	issuer := flag.String("issuer", "http://127.0.0.1:8081/realms/dev", "the development issuer")
	mint := flag.String("mint", "", "a bench/cmd/bulkissuer's URL (http://HOST:PORT): the others' tokens come from its /mint, not the token endpoint")
	others := flag.Int("others", 50, "subjects besides the flooder (enterprise plan)")
	prefix := flag.String("prefix", "enterprise-noisy", "the others' user names: PREFIX-RUN-i")
	rate := flag.Float64("rate", 500, "the others' calls per second, in total")
	conns := flag.Int("flood", 16, "the flooder's connections (HTTP/1.1, one call at a time each)")
	phase := flag.Duration("phase", 10*time.Second, "length of each phase")
	rounds := flag.Int("rounds", 3, "rounds: each edge, quiet then flood")
	flag.StringVar(&procedure, "procedure", procedure, "the procedure every call asks for, with the body {}")
	run := flag.String("run", strconv.FormatInt(time.Now().Unix()%1e6, 36), "a tag that makes this run's subjects unique")
	flag.Parse()
	if err := measure(*edges, *pids, *issuer, *mint, *prefix, *others, *rate, *conns, *phase, *rounds, *run); err != nil {
		fmt.Fprintln(os.Stderr, "noisy:", err)
		os.Exit(1)
	}
}

type target struct{ name, url, pid string }

func parseTargets(edges, pids string) ([]target, error) {
	pidOf := map[string]string{}
	for _, kv := range strings.Split(pids, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			pidOf[k] = v
		}
	}
	var out []target
	for _, kv := range strings.Split(edges, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return nil, fmt.Errorf("-edges: %q is not NAME=URL", kv)
		}
		out = append(out, target{k, v, pidOf[k]})
	}
	return out, nil
}

// phaseResult is one phase on one edge.
type phaseResult struct {
	calls, errors int
	errorKinds    map[string]int // the others' errors: HTTP status or the client's error
	p50, p99      time.Duration
	flood         map[int]int // the flooder's answers by HTTP status
	floodAnswers  int
	cpu           time.Duration // the edge process's
}

func measure(edges, pids, issuer, mint, prefix string, nOthers int, rate float64, nConns int, phase time.Duration, rounds int, run string) error {
	targets, err := parseTargets(edges, pids)
	if err != nil {
		return err
	}
	others, err := tokens(issuer, mint, prefix, run, nOthers)
	if err != nil {
		return err
	}
	flooder, err := token(issuer, "free-noisy-"+run)
	if err != nil {
		return err
	}
	fmt.Printf("others %d subjects, %.0f calls/s in total; flooder 1 free subject on %d HTTP/1.1 connections; phases of %v, %d rounds\n",
		nOthers, rate, nConns, phase, rounds)
	fmt.Printf("%-5s %-8s %-6s %7s %6s %8s %8s %9s %9s %9s %10s %s\n", "round", "edge", "phase", "calls", "errors", "p50", "p99", "flood/s", "cpu/s", "µs/call", "µs/flood", "flood answers")
	type pair struct{ quiet, flood phaseResult }
	results := map[string][]pair{}
	for r := 1; r <= rounds; r++ {
		for _, t := range targets {
			q := runPhase(t, others, rate, "", 0, phase)
			report(r, t.name, "quiet", q, phaseResult{}, phase)
			f := q
			if nConns > 0 {
				f = runPhase(t, others, rate, flooder, nConns, phase)
				report(r, t.name, "flood", f, q, phase)
			}
			results[t.name] = append(results[t.name], pair{q, f})
		}
	}
	fmt.Println("\nmedians over the rounds")
	fmt.Printf("%-8s %9s %9s %9s %12s %10s %12s %12s\n", "edge", "p99 quiet", "p99 flood", "ratio", "errors(all)", "flood/s", "µs/flood", "µs/call")
	for _, t := range targets {
		var q99, f99, ratio, perSec, perAnswer, calls []float64
		errs := 0
		for _, p := range results[t.name] {
			q99 = append(q99, ms(p.quiet.p99))
			f99 = append(f99, ms(p.flood.p99))
			ratio = append(ratio, ms(p.flood.p99)/ms(p.quiet.p99))
			perSec = append(perSec, float64(p.flood.floodAnswers)/phase.Seconds())
			if p.flood.floodAnswers > 0 && t.pid != "" {
				perAnswer = append(perAnswer, float64((p.flood.cpu-p.quiet.cpu).Microseconds())/float64(p.flood.floodAnswers))
			}
			errs += p.quiet.errors
			if nConns > 0 {
				errs += p.flood.errors
			}
			calls = append(calls, perCall(p.quiet))
		}
		fmt.Printf("%-8s %8.2fms %8.2fms %9.2f %12d %10.0f %12.1f %12.1f\n", t.name, median(q99), median(f99), median(ratio), errs, median(perSec), median(perAnswer), median(calls))
	}
	return nil
}

func report(round int, edge, name string, p, quiet phaseResult, phase time.Duration) {
	perFlood := "-"
	if p.floodAnswers > 0 {
		perFlood = fmt.Sprintf("%.1f", float64((p.cpu-quiet.cpu).Microseconds())/float64(p.floodAnswers))
	}
	fmt.Printf("%-5d %-8s %-6s %7d %6d %8s %8s %9.0f %9s %9.1f %10s %v\n", round, edge, name, p.calls, p.errors,
		p.p50.Round(10*time.Microsecond), p.p99.Round(10*time.Microsecond), float64(p.floodAnswers)/phase.Seconds(),
		(p.cpu / time.Duration(phase.Seconds())).Round(time.Millisecond), perCall(p), perFlood, p.flood)
	if len(p.errorKinds) > 0 {
		fmt.Printf("      the others' errors: %v\n", p.errorKinds)
	}
}

// errorKind names a client error without its addresses.
func errorKind(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		s = s[i+2:]
	}
	return s
}

// perCall is the edge's CPU per call of the others in a quiet phase (µs).
func perCall(p phaseResult) float64 {
	if p.calls == 0 || p.floodAnswers > 0 {
		return 0
	}
	return float64(p.cpu.Microseconds()) / float64(p.calls)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	slices.Sort(xs)
	return xs[len(xs)/2]
}

// runPhase runs the others for d, and the flooder with them if conns > 0.
func runPhase(t target, others []string, rate float64, flooder string, conns int, d time.Duration) phaseResult {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	res := phaseResult{flood: map[int]int{}, errorKinds: map[string]int{}}
	var mu sync.Mutex
	var lat []time.Duration
	var errs atomic.Int64
	var wg sync.WaitGroup
	cpu0 := cpuTime(t.pid)

	floodDone := make(chan map[int]int, conns)
	for range conns {
		go func() { floodDone <- flood(ctx, t.url, flooder) }()
	}
	// The others: an open model, one call every 1/rate, round-robin.
	tr := &http.Transport{MaxIdleConnsPerHost: 256, Proxy: nil}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	every := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	for i := 0; ; i++ {
		next := start.Add(time.Duration(i) * every)
		if wait := time.Until(next); wait > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
		if ctx.Err() != nil {
			break
		}
		tok := others[i%len(others)]
		wg.Go(func() {
			t0 := time.Now()
			status, err := call(context.Background(), hc, t.url, tok)
			took := time.Since(t0)
			mu.Lock()
			defer mu.Unlock()
			lat = append(lat, took)
			switch {
			case err != nil:
				errs.Add(1)
				res.errorKinds[errorKind(err)]++
			case status != http.StatusOK:
				errs.Add(1)
				res.errorKinds["HTTP "+strconv.Itoa(status)]++
			}
		})
	}
	res.cpu = cpuTime(t.pid) - cpu0
	wg.Wait()
	for range conns {
		for k, v := range <-floodDone {
			res.flood[k] += v
			res.floodAnswers += v
		}
	}
	slices.Sort(lat)
	res.calls, res.errors = len(lat), int(errs.Load())
	if len(lat) > 0 {
		res.p50, res.p99 = lat[len(lat)/2], lat[len(lat)*99/100]
	}
	return res
}

// flood calls on one connection of its own until ctx ends, as fast as the
// answers come, whatever they say.
func flood(ctx context.Context, edge, tok string) map[int]int {
	tr := &http.Transport{MaxConnsPerHost: 1, Proxy: nil}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	out := map[int]int{}
	for ctx.Err() == nil {
		status, err := call(ctx, hc, edge, tok)
		if err != nil {
			if ctx.Err() == nil {
				out[0]++
			}
			continue
		}
		out[status]++
	}
	return out
}

func call(ctx context.Context, hc *http.Client, edge, tok string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, edge+procedure, strings.NewReader("{}"))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+tok)
	res, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
	_ = res.Body.Close()
	return res.StatusCode, nil
}

// cpuTime is the user and system time of process pid (0 without one).
func cpuTime(pid string) time.Duration {
	if pid == "" {
		return 0
	}
	b, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return 0
	}
	// The fields after the command's closing parenthesis; utime and
	// stime are the 14th and 15th of the line.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// tokens gets the n subjects' tokens from the issuer's token endpoint, 8
// at a time (the issuer signs three tokens for each: a hundred thousand
// take minutes), or, when mint is a bulkissuer's URL, from its /mint in one
// call.
func tokens(issuer, mint, prefix, run string, n int) ([]string, error) {
	if mint != "" {
		return minted(mint, fmt.Sprintf("%s-%s", prefix, run), n)
	}
	out := make([]string, n)
	var g errgroup.Group
	g.SetLimit(8)
	for i := range n {
		g.Go(func() (err error) {
			out[i], err = token(issuer, fmt.Sprintf("%s-%s-%d", prefix, run, i))
			return err
		})
	}
	return out, g.Wait()
}

// minted gets n tokens from a bulkissuer's /mint, for the users prefix-i.
func minted(mint, prefix string, n int) ([]string, error) {
	q := url.Values{"prefix": {prefix}, "n": {strconv.Itoa(n)}}
	res, err := http.Get(mint + "/mint?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
		return nil, fmt.Errorf("mint: %s: %s", res.Status, b)
	}
	out := make([]string, 0, n)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 64<<10)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("mint: %w", err)
	}
	if len(out) != n {
		return nil, fmt.Errorf("mint: %d tokens, want %d (see the bulkissuer's log)", len(out), n)
	}
	return out, nil
}

// token is an access token of the development issuer for user (password
// grant).
func token(issuer, user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return devissuer.Password(ctx, nil, issuer, "cli", user, "dev")
}
