// Command streams measures what open WatchEnvironment streams cost an edge
// replica and its Redis (docs/benchmarks.md, "Ten thousand streams"): it
// opens -n streams (gRPC over cleartext HTTP/2) across -subjects subjects of
// the development issuer, measures the edge's heap, stacks, goroutines and
// resident memory per open stream, holds them for -hold while counting the
// lease renewals (edge_stream_lease_renewals_total) and Redis's commands and
// CPU, then opens and closes -churn-rate streams a second for -churn-for on
// other subjects and reports every refusal. bench/streams.sh runs it.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"github.com/redis/go-redis/v9"

	"github.com/orgedge/edge/devissuer"
	svcv1 "github.com/orgedge/edge/gen/svc/v1"
	"github.com/orgedge/edge/gen/svc/v1/svcv1connect"
)

func main() {
	var b bench
	flag.StringVar(&b.edge, "edge", "http://127.0.0.1:18180", "the edge's API")
	flag.StringVar(&b.admin, "admin", "http://127.0.0.1:19190", "the edge's admin listener (metrics, pprof)")
	flag.StringVar(&b.issuer, "issuer", "http://127.0.0.1:8081/realms/dev", "the development issuer")
	flag.StringVar(&b.redisAddr, "redis", "127.0.0.1:6399", "the edge's Redis")
	flag.IntVar(&b.n, "n", 10000, "streams held open")
	flag.IntVar(&b.subjects, "subjects", 100, "subjects holding them")
	flag.DurationVar(&b.hold, "hold", time.Minute, "how long they are held (several renewal rounds)")
	flag.IntVar(&b.churnRate, "churn-rate", 1000, "streams opened (and closed) a second after the hold")
	flag.DurationVar(&b.churnFor, "churn-for", 20*time.Second, "how long the churn lasts")
	flag.DurationVar(&b.churnLife, "churn-life", 500*time.Millisecond, "how long a churned stream stays open after its first message")
	flag.IntVar(&b.churnSubjects, "churn-subjects", 100, "subjects of the churned streams")
	flag.StringVar(&b.profile, "heap-profile", "", "with streams open, save the edge's heap profile here")
	flag.StringVar(&b.bare, "bare", "", "also open -n streams through this bare proxy (loadtest/bareproxy) first, and measure it as the edge: the floor under the edge's cost")
	flag.StringVar(&b.barePprof, "bare-pprof", "", "the bare proxy's -pprof listener")
	flag.StringVar(&b.run, "run", strconv.FormatInt(time.Now().Unix(), 36), "distinguishes this run's subjects")
	flag.Parse()
	if err := b.main(); err != nil {
		fmt.Fprintln(os.Stderr, "streams:", err)
		os.Exit(1)
	}
}

type bench struct {
	edge, admin, issuer, redisAddr, run string
	profile, bare, barePprof            string
	n, subjects, churnRate              int
	churnSubjects                       int
	hold, churnFor, churnLife           time.Duration

	hc  *http.Client // gRPC over h2c
	env svcv1connect.EnvironmentServiceClient
	rdb *redis.Client
}

// subject is one caller and the environment its streams watch.
type subject struct{ token, env string }

func (b *bench) main() error {
	ctx := context.Background()
	// One HTTP/2 transport: it opens another connection whenever the
	// edge's 250 streams per connection are taken.
	var h2c http.Protocols
	h2c.SetUnencryptedHTTP2(true)
	b.hc = &http.Client{Transport: &http.Transport{
		Protocols:   &h2c,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
	}}
	b.env = svcv1connect.NewEnvironmentServiceClient(b.hc, b.edge, connect.WithGRPC())
	b.rdb = redis.NewClient(&redis.Options{Addr: b.redisAddr})
	defer b.rdb.Close()

	held, err := b.setup(ctx, "hold", b.subjects)
	if err != nil {
		return err
	}
	churned, err := b.setup(ctx, "churn", b.churnSubjects)
	if err != nil {
		return err
	}

	if b.bare != "" {
		if err := b.measureBare(ctx, held); err != nil {
			return err
		}
	}
	before, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	holdCtx, closeAll := context.WithCancel(ctx)
	defer closeAll()
	start := time.Now()
	h := holdStreams(holdCtx, b.env, held, b.n)
	fmt.Printf("opened %d streams on %d subjects in %.1fs; %d failed %v\n", h.opened.Load(), len(held), time.Since(start).Seconds(), h.failed.Load(), h.errs.String())
	time.Sleep(2 * time.Second) // the last streams' first renewals and buffers settle
	open, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	per := func(name string) float64 { return (open.edge[name] - before.edge[name]) / float64(h.opened.Load()) }
	fmt.Printf("edge per open stream: heap %.0f B, stacks %.0f B, heap+stacks %.0f B, goroutines %.2f, RSS %.0f B (edge_open_streams %.0f, leases held %.0f)\n",
		per("go_memstats_heap_inuse_bytes"), per("go_memstats_stack_inuse_bytes"),
		per("go_memstats_heap_inuse_bytes")+per("go_memstats_stack_inuse_bytes"), per("go_goroutines"), per("process_resident_memory_bytes"),
		open.edge["edge_open_streams"], open.edge["edge_stream_leases_held"])
	leaseBytes, err := b.leaseBytes(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("redis per open stream: %.0f B of lease sets (MEMORY USAGE), used_memory %+.0f B\n", leaseBytes/float64(h.opened.Load()),
		(open.redis["used_memory"]-before.redis["used_memory"])/float64(h.opened.Load()))
	if b.profile != "" {
		if err := b.saveProfile(); err != nil {
			return err
		}
	}

	time.Sleep(b.hold)
	after, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	secs := after.at.Sub(open.at).Seconds()
	d := func(m map[string]float64, name string) float64 {
		return m[name] - open.edge[name]
	}
	rd := func(name string) float64 { return after.redis[name] - open.redis[name] }
	renewed, lost, fail := d(after.edge, `edge_stream_lease_renewals_total{outcome="renewed"}`), d(after.edge, `edge_stream_lease_renewals_total{outcome="lost"}`), d(after.edge, `edge_stream_lease_renewals_total{outcome="failed"}`)
	rounds := d(after.edge, "edge_stream_lease_renewal_rounds_total")
	fmt.Printf("hold %.0fs: %.0f renewal rounds, %.0f renewed, %.0f lost, %.0f failed (%.1f per open stream per round); %.0f renewals/s\n",
		secs, rounds, renewed, lost, fail, (renewed+lost+fail)/max(rounds, 1)/float64(h.opened.Load()), (renewed+lost+fail)/secs)
	fmt.Printf("hold: redis %.0f commands/s (evalsha %.1f/s, zadd %.1f/s), redis CPU %.3f s/s; edge CPU %.3f s/s, edge Redis round trips %.1f/s\n",
		rd("cmdstat_calls")/secs, rd("cmdstat_evalsha")/secs, rd("cmdstat_zadd")/secs, (rd("used_cpu_sys")+rd("used_cpu_user"))/secs,
		d(after.edge, "process_cpu_seconds_total")/secs, d(after.edge, "edge_redis_round_trips_total")/secs)

	if err := b.churn(ctx, churned, after); err != nil {
		return err
	}
	closeAll()
	h.wg.Wait()
	return nil
}

// holding is streams held open until their context ends.
type holding struct {
	opened, failed atomic.Int64
	errs           errorCounts
	wg             sync.WaitGroup // ends when every stream is closed
}

// holdStreams opens n streams on env across subs, 200 opening at a time,
// each held until ctx ends, and returns once each is open or has failed.
func holdStreams(ctx context.Context, env svcv1connect.EnvironmentServiceClient, subs []subject, n int) *holding {
	h := &holding{}
	sem := make(chan struct{}, 200)
	for i := range n {
		sem <- struct{}{}
		h.wg.Go(func() {
			st, err := openOn(ctx, env, subs[i%len(subs)])
			<-sem
			if err != nil {
				h.failed.Add(1)
				h.errs.add(err)
				return
			}
			h.opened.Add(1)
			for st.Receive() { // until ctx ends
			}
			_ = st.Close()
		})
	}
	for h.opened.Load()+h.failed.Load() < int64(n) {
		time.Sleep(50 * time.Millisecond)
	}
	return h
}

// measureBare opens b.n streams through the bare proxy, measures its heap,
// stacks and goroutines per open stream as the edge's are measured (after a
// forced GC), then closes them.
func (b *bench) measureBare(ctx context.Context, subs []subject) error {
	env := svcv1connect.NewEnvironmentServiceClient(b.hc, b.bare, connect.WithGRPC())
	before, err := b.memStats()
	if err != nil {
		return err
	}
	holdCtx, closeAll := context.WithCancel(ctx)
	defer closeAll()
	h := holdStreams(holdCtx, env, subs, b.n)
	time.Sleep(2 * time.Second) // as the edge's: buffers settle
	open, err := b.memStats()
	if err != nil {
		return err
	}
	n := float64(h.opened.Load())
	heap, stacks := (open.heap-before.heap)/n, (open.stacks-before.stacks)/n
	fmt.Printf("bare proxy per open stream: heap %.0f B, stacks %.0f B, heap+stacks %.0f B, goroutines %.2f (%d open, %d failed %v)\n",
		heap, stacks, heap+stacks, (open.goroutines-before.goroutines)/n, h.opened.Load(), h.failed.Load(), h.errs.String())
	closeAll()
	h.wg.Wait()
	return nil
}

type memStats struct{ heap, stacks, goroutines float64 }

// memStats reads the bare proxy's heap and stacks in use (after a GC) and
// its goroutines from net/http/pprof.
func (b *bench) memStats() (memStats, error) {
	var m memStats
	res, err := http.Get(b.barePprof + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return m, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "# HeapInuse = "); ok {
			m.heap, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), "# Stack = "); ok { // in use / from the system
			inuse, _, _ := strings.Cut(v, " ")
			m.stacks, _ = strconv.ParseFloat(inuse, 64)
		}
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	res, err = http.Get(b.barePprof + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return m, err
	}
	defer res.Body.Close()
	first, err := bufio.NewReader(res.Body).ReadString('\n')
	if err != nil {
		return m, err
	}
	total, ok := strings.CutPrefix(strings.TrimSpace(first), "goroutine profile: total ")
	if !ok || m.heap == 0 || m.stacks == 0 {
		return m, fmt.Errorf("%s: not net/http/pprof's heap and goroutine profiles", b.barePprof)
	}
	m.goroutines, err = strconv.ParseFloat(total, 64)
	return m, err
}

// setup makes count subjects, each with an organization, a project and an
// environment to watch.
func (b *bench) setup(ctx context.Context, kind string, count int) ([]subject, error) {
	subs := make([]subject, count)
	errc := make(chan error, count)
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := b.newSubject(ctx, fmt.Sprintf("enterprise-streams-%s-%s-%d", b.run, kind, i))
			if err != nil {
				errc <- err
				return
			}
			subs[i] = s
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil {
		return nil, err
	}
	return subs, nil
}

func (b *bench) newSubject(ctx context.Context, user string) (subject, error) {
	tok, err := b.token(user)
	if err != nil {
		return subject{}, err
	}
	org := svcv1connect.NewOrganizationServiceClient(b.hc, b.edge, connect.WithGRPC())
	o, err := org.CreateOrganization(ctx, request(tok, &svcv1.CreateOrganizationRequest{Name: user, BillingEmail: "bench@example.com"}))
	if err != nil {
		return subject{}, fmt.Errorf("%s: CreateOrganization: %w", user, err)
	}
	p, err := org.CreateProject(ctx, request(tok, &svcv1.CreateProjectRequest{OrganizationId: o.Msg.GetId(), Name: "bench"}))
	if err != nil {
		return subject{}, fmt.Errorf("%s: CreateProject: %w", user, err)
	}
	e, err := b.env.CreateEnvironment(ctx, request(tok, &svcv1.CreateEnvironmentRequest{ProjectId: p.Msg.GetId(), Name: "watched", BlueprintId: "redis-7"}))
	if err != nil {
		return subject{}, fmt.Errorf("%s: CreateEnvironment: %w", user, err)
	}
	return subject{token: tok, env: e.Msg.GetEnvironment().GetId()}, nil
}

func request[T any](token string, msg *T) *connect.Request[T] {
	r := connect.NewRequest(msg)
	r.Header().Set("Authorization", "Bearer "+token)
	return r
}

// openOn opens a stream on env and waits for its first message.
func openOn(ctx context.Context, env svcv1connect.EnvironmentServiceClient, s subject) (*connect.ServerStreamForClient[svcv1.WatchEnvironmentResponse], error) {
	st, err := env.WatchEnvironment(ctx, request(s.token, &svcv1.WatchEnvironmentRequest{EnvironmentId: s.env}))
	if err != nil {
		return nil, err
	}
	if !st.Receive() {
		err := st.Err()
		_ = st.Close()
		if err == nil {
			err = errors.New("stream ended before its first message")
		}
		return nil, err
	}
	return st, nil
}

// churn opens churnRate streams a second for churnFor, each closed
// churnLife after its first message, and reports their outcomes.
func (b *bench) churn(ctx context.Context, subs []subject, from snapshot) error {
	var ok atomic.Int64
	var errs errorCounts
	var lat latencies
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(b.churnRate)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	start := time.Now()
	sent := 0
	for time.Since(start) < b.churnFor {
		<-tick.C
		// A late tick still opens every stream it owes: the rate is kept.
		due := int(time.Since(start) / interval)
		for ; sent < due; sent++ {
			s := subs[sent%len(subs)]
			wg.Add(1)
			go func() {
				defer wg.Done()
				t0 := time.Now()
				sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
				defer cancel()
				st, err := openOn(sctx, b.env, s)
				if err != nil {
					errs.add(err)
					return
				}
				lat.add(time.Since(t0))
				ok.Add(1)
				time.Sleep(b.churnLife)
				cancel()
				_ = st.Close()
			}()
		}
	}
	elapsed := time.Since(start).Seconds()
	wg.Wait()
	after, err := b.snapshot(ctx)
	if err != nil {
		return err
	}
	secs := after.at.Sub(from.at).Seconds()
	fmt.Printf("churn %.0fs: %d opened (%.0f/s), %d ok, %d refused or failed %v; time to first message p50 %v p99 %v; edge CPU %.3f s/s; edge refusals by limit: %v\n",
		elapsed, sent, float64(sent)/elapsed, ok.Load(), int64(sent)-ok.Load(), errs.String(), lat.q(0.5), lat.q(0.99),
		(after.edge["process_cpu_seconds_total"]-from.edge["process_cpu_seconds_total"])/secs, refusals(from, after))
	return nil
}

// refusals lists the limit decisions that refused between two snapshots.
func refusals(from, to snapshot) map[string]float64 {
	out := map[string]float64{}
	for k, v := range to.edge {
		if strings.HasPrefix(k, "edge_limit_decisions_total{") && strings.Contains(k, `outcome="refused"`) && v > from.edge[k] {
			out[k] = v - from.edge[k]
		}
	}
	return out
}

type errorCounts struct {
	mu sync.Mutex
	m  map[string]int
}

func (e *errorCounts) add(err error) {
	key := err.Error()
	if ce := new(connect.Error); errors.As(err, &ce) {
		key = ce.Code().String()
		for _, d := range ce.Details() {
			if v, err := d.Value(); err == nil {
				if info, ok := v.(interface{ GetReason() string }); ok {
					key += " " + info.GetReason()
				}
			}
		}
	}
	if len(key) > 120 {
		key = key[:120]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.m == nil {
		e.m = map[string]int{}
	}
	e.m[key]++
}

func (e *errorCounts) String() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	b, _ := json.Marshal(e.m)
	return string(b)
}

type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

func (l *latencies) q(q float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return l.d[int(q*float64(len(l.d)-1))].Round(time.Microsecond)
}

// snapshot is the edge's metrics (after a forced GC) and Redis's INFO at
// one instant.
type snapshot struct {
	at          time.Time
	edge, redis map[string]float64
}

func (b *bench) snapshot(ctx context.Context) (snapshot, error) {
	s := snapshot{at: time.Now(), edge: map[string]float64{}, redis: map[string]float64{}}
	// ?gc=1 collects first, so that the heap is what is live.
	res, err := http.Get(b.admin + "/debug/pprof/heap?gc=1&debug=1")
	if err != nil {
		return s, err
	}
	_, _ = io.Copy(io.Discard, res.Body)
	res.Body.Close()
	res, err = http.Get(b.admin + "/metrics")
	if err != nil {
		return s, err
	}
	defer res.Body.Close()
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		s.edge[name] += v
		if j := strings.IndexByte(name, '{'); j > 0 {
			s.edge[name[:j]] += v // the sum over labels too
		}
	}
	info, err := b.rdb.Info(ctx, "memory", "cpu", "commandstats").Result()
	if err != nil {
		return s, err
	}
	for _, line := range strings.Split(info, "\r\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if strings.HasPrefix(k, "cmdstat_") {
			// cmdstat_zadd:calls=1,usec=…
			for _, f := range strings.Split(v, ",") {
				if n, ok := strings.CutPrefix(f, "calls="); ok {
					c, _ := strconv.ParseFloat(n, 64)
					s.redis[k] = c
					s.redis["cmdstat_calls"] += c
				}
			}
			continue
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil {
			s.redis[k] = f
		}
	}
	return s, nil
}

// token is an access token of the development issuer for user (password
// grant).
func (b *bench) token(user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return devissuer.Password(ctx, nil, b.issuer, "cli", user, "dev")
}

// leaseBytes sums MEMORY USAGE over the subjects' lease sets.
func (b *bench) leaseBytes(ctx context.Context) (float64, error) {
	var total float64
	iter := b.rdb.Scan(ctx, 0, "*:streams", 1000).Iterator()
	for iter.Next(ctx) {
		n, err := b.rdb.MemoryUsage(ctx, iter.Val()).Result()
		if err != nil {
			return 0, err
		}
		total += float64(n)
	}
	return total, iter.Err()
}

// saveProfile saves the edge's heap profile (after a GC) to b.profile,
// and its goroutines (counted by stack) next to it.
func (b *bench) saveProfile() error {
	if err := b.save("/debug/pprof/goroutine?debug=1", strings.TrimSuffix(b.profile, ".pprof")+"-goroutines.txt"); err != nil {
		return err
	}
	return b.save("/debug/pprof/heap?gc=1", b.profile)
}

func (b *bench) save(path, file string) error {
	res, err := http.Get(b.admin + path)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, res.Body); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
