// Command storage measures what the edge keeps in Redis: bytes per stored
// idempotent answer as a function of the answer's size (-mode answers), and
// bytes per active subject (-mode subjects). It drives a running edge in
// development mode (its issuer grants a token to any free-, pro- or
// enterprise- user with password dev) over the Connect protocol with JSON,
// and reads Redis's own accounting: MEMORY USAGE of the keys and the
// allocated memory (MEMORY STATS total.allocated, which INFO memory calls
// used_memory, less clients' buffers). bench/storage.sh starts what it needs.
//
// It is a measurement, not a load: calls go four at a time.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/orgedge/edge/devissuer"
	"github.com/redis/go-redis/v9"
)

func main() {
	edge := flag.String("edge", "http://127.0.0.1:8080", "the edge's API address")
	issuer := flag.String("issuer", "http://127.0.0.1:8081/realms/dev", "the development issuer")
	addr := flag.String("redis", "127.0.0.1:6379", "the edge's Redis")
	mode := flag.String("mode", "answers", "answers (bytes per stored answer) or subjects (bytes per active subject)")
	n := flag.Int("n", 500, "answers: keyed calls per answer size; subjects: distinct subjects")
	run := flag.String("run", "r"+strconv.FormatInt(time.Now().UnixNano()%1e9, 36), "a tag that makes this run's user and organization names unique (a DNS label)")
	flag.Parse()
	m := &meter{
		edge: *edge, issuer: *issuer, run: *run,
		rdb: redis.NewClient(&redis.Options{Addr: *addr, ReadTimeout: 10 * time.Second}),
		hc:  &http.Client{Timeout: 30 * time.Second},
	}
	var err error
	switch *mode {
	case "answers":
		err = m.answers(*n)
	case "subjects":
		err = m.subjects(*n)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "storage:", err)
		os.Exit(1)
	}
}

type meter struct {
	edge, issuer, run string
	rdb               *redis.Client
	hc                *http.Client
}

// answerSizes are CreateProject descriptions: the backend takes at most 2,000
// characters, and characters of more bytes make larger answers.
var answerSizes = []struct {
	name string
	desc string
}{
	{"empty", ""},
	{"500 ascii", strings.Repeat("a", 500)},
	{"2000 ascii", strings.Repeat("a", 2000)},
	{"2000 x 3 bytes", strings.Repeat("€", 2000)},
	{"2000 x 4 bytes", strings.Repeat("😀", 2000)},
}

// subjectsPerRun spreads the keyed calls so that no plan rate refuses them.
const subjectsPerRun = 10

func (m *meter) answers(n int) error {
	ctx := context.Background()
	type subject struct{ token, org string }
	subs := make([]subject, subjectsPerRun)
	for i := range subs {
		tok, err := m.token(fmt.Sprintf("enterprise-idem-%s-%d", m.run, i))
		if err != nil {
			return err
		}
		var org struct{ ID string }
		if _, err := m.call(tok, "OrganizationService/CreateOrganization", "",
			map[string]string{"name": fmt.Sprintf("%s-o%d", m.run, i), "billingEmail": "a@b.example"}, &org); err != nil {
			return err
		}
		subs[i] = subject{tok, org.ID}
		// The subject's ledger and limit keys exist before the measure.
		if _, err := m.call(tok, "OrganizationService/CreateProject", m.run+"-warm",
			map[string]string{"organizationId": org.ID, "name": "warm"}, nil); err != nil {
			return err
		}
	}
	fmt.Printf("%-16s %8s %8s %10s %10s %12s %12s\n", "description", "answer", "stored", "entry", "ledger", "allocated", "per answer")
	fmt.Printf("%-16s %8s %8s %10s %10s %12s %12s\n", "", "body B", "fields B", "MEMUSAGE B", "B/entry", "delta B", "B (delta/n)")
	for si, size := range answerSizes {
		before, used0, err := m.snapshot(ctx, "*idem:*")
		if err != nil {
			return err
		}
		ledgersBefore, err := m.ledgerBytes(ctx, before)
		if err != nil {
			return err
		}
		var mu sync.Mutex
		var bodyBytes int
		err = parallel(n, 4, func(i int) error {
			s := subs[i%len(subs)]
			b, err := m.call(s.token, "OrganizationService/CreateProject", fmt.Sprintf("%s-%d-%d", m.run, si, i),
				map[string]string{"organizationId": s.org, "name": fmt.Sprintf("p%d-%d", si, i), "description": size.desc}, nil)
			mu.Lock()
			bodyBytes += b
			mu.Unlock()
			return err
		})
		if err != nil {
			return err
		}
		after, used1, err := m.snapshot(ctx, "*idem:*")
		if err != nil {
			return err
		}
		var entries, fields, usage int64
		for k := range after {
			if _, old := before[k]; old || strings.HasSuffix(k, ":ledger") {
				continue
			}
			entries++
			u, err := m.rdb.MemoryUsage(ctx, k, 0).Result()
			if err != nil {
				return err
			}
			usage += u
			for _, f := range []string{"body", "header", "trailer", "fp", "ct", "code", "status", "state"} {
				l, err := m.rdb.HStrLen(ctx, k, f).Result()
				if err != nil {
					return err
				}
				fields += l
			}
		}
		if entries != int64(n) {
			return fmt.Errorf("%s: %d new entries in Redis after %d keyed calls", size.name, entries, n)
		}
		ledgersAfter, err := m.ledgerBytes(ctx, after)
		if err != nil {
			return err
		}
		fmt.Printf("%-16s %8d %8d %10d %10d %12d %12d\n", size.name, bodyBytes/n, fields/entries, usage/entries,
			(ledgersAfter-ledgersBefore)/entries, used1-used0, (used1-used0)/int64(n))
	}
	return nil
}

func (m *meter) subjects(k int) error {
	ctx := context.Background()
	before, used0, err := m.snapshot(ctx, "*")
	if err != nil {
		return err
	}
	err = parallel(k, 4, func(i int) error {
		tok, err := m.token(fmt.Sprintf("free-subj-%s-%d", m.run, i))
		if err != nil {
			return err
		}
		_, err = m.call(tok, "OrganizationService/ListOrganizations", "", map[string]string{}, nil)
		return err
	})
	if err != nil {
		return err
	}
	after, used1, err := m.snapshot(ctx, "*")
	if err != nil {
		return err
	}
	var keys, usage int64
	kinds := map[string]int{}
	kindBytes := map[string]int64{}
	tags := map[string]struct{}{}
	for key := range after {
		if _, old := before[key]; old {
			continue
		}
		u, err := m.rdb.MemoryUsage(ctx, key, 0).Result()
		if errors.Is(err, redis.Nil) {
			continue // expired since the scan: a limit's state of one call lives a second or two
		}
		if err != nil {
			return err
		}
		keys++
		usage += u
		kinds[kind(key)]++
		kindBytes[kind(key)] += u
		if i := strings.IndexByte(key, '{'); i >= 0 {
			tags[key[i:i+strings.IndexByte(key[i:], '}')]] = struct{}{}
		}
	}
	// A call the limits admitted without Redis (fail_open, Redis slower
	// than the edge's timeout) leaves no key: count the subjects that did.
	active := int64(len(tags))
	if active == 0 {
		return errors.New("no subject left a key")
	}
	fmt.Printf("subjects %d, with keys %d, new keys %d (%v)\n", k, active, keys, kinds)
	for k, n := range kinds {
		fmt.Printf("  %-40s %6d keys, MEMORY USAGE %d B each\n", k, n, kindBytes[k]/int64(n))
	}
	fmt.Printf("MEMORY USAGE per subject %d B, allocated delta %d B, per subject %d B\n",
		usage/active, used1-used0, (used1-used0)/active)
	return nil
}

// kind names a key by its shape, its subject's hash tag left out.
func kind(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i:], '}'); j >= 0 {
			return key[:i] + "{}" + key[i+j+1:]
		}
	}
	return key
}

// snapshot is the allocated memory (usedMemory) and then the keys that match
// pattern.
func (m *meter) snapshot(ctx context.Context, pattern string) (map[string]struct{}, int64, error) {
	used, err := m.usedMemory(ctx)
	if err != nil {
		return nil, 0, err
	}
	keys := map[string]struct{}{}
	it := m.rdb.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		keys[it.Val()] = struct{}{}
	}
	return keys, used, it.Err()
}

func (m *meter) ledgerBytes(ctx context.Context, keys map[string]struct{}) (int64, error) {
	var sum int64
	for k := range keys {
		if !strings.HasSuffix(k, ":ledger") {
			continue
		}
		u, err := m.rdb.MemoryUsage(ctx, k, 0).Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return 0, err
		}
		sum += u
	}
	return sum, nil
}

// usedMemory is INFO memory's used_memory less what MEMORY STATS counts as
// clients' buffers (clients.normal): the edge's pooled connections come and
// go with its load, and their buffers are not what it stores.
func (m *meter) usedMemory(ctx context.Context) (int64, error) {
	v, err := m.rdb.Do(ctx, "MEMORY", "STATS").Result()
	if err != nil {
		return 0, err
	}
	stats := map[string]int64{}
	put := func(k, v any) {
		if name, ok := k.(string); ok {
			if n, ok := v.(int64); ok {
				stats[name] = n
			}
		}
	}
	switch v := v.(type) {
	case map[any]any: // RESP3
		for k, x := range v {
			put(k, x)
		}
	case []any: // RESP2: name, value, …
		for i := 0; i+1 < len(v); i += 2 {
			put(v[i], v[i+1])
		}
	}
	total, ok := stats["total.allocated"]
	if !ok {
		return 0, fmt.Errorf("MEMORY STATS without total.allocated: %v", v)
	}
	return total - stats["clients.normal"], nil
}

// token is an access token of the development issuer for user (password grant).
func (m *meter) token(user string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return devissuer.Password(ctx, m.hc, m.issuer, "cli", user, "dev")
}

// call makes one Connect JSON unary call, with an Idempotency-Key unless key
// is empty, and returns the answer body's size.
func (m *meter) call(token, procedure, key string, in any, out any) (int, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodPost, m.edge+"/svc.v1."+procedure, bytes.NewReader(b))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	// A client retries unavailable, and aborted (the key still in flight),
	// with the same key (docs/idempotency.md): on a loaded machine Redis may
	// miss the edge's 50 ms timeout.
	var res *http.Response
	var body []byte
	for try := 0; ; try++ {
		req.Body = io.NopCloser(bytes.NewReader(b))
		if res, err = m.hc.Do(req); err != nil {
			return 0, err
		}
		body, err = io.ReadAll(io.LimitReader(res.Body, 1<<20))
		res.Body.Close()
		if err != nil {
			return 0, err
		}
		again := res.StatusCode == http.StatusServiceUnavailable ||
			res.StatusCode == http.StatusConflict && bytes.Contains(body, []byte(`"code":"aborted"`))
		if !again || try == 20 {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	if res.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s: %.200s", procedure, res.Status, body)
	}
	if out != nil {
		return len(body), json.Unmarshal(body, out)
	}
	return len(body), nil
}

// parallel runs f(0..n-1), width at a time, and returns the first error.
func parallel(n, width int, f func(int) error) error {
	next := make(chan int)
	errs := make(chan error, width)
	var wg sync.WaitGroup
	for w := 0; w < width; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var first error
			for i := range next {
				if err := f(i); err != nil && first == nil {
					first = err
				}
			}
			errs <- first
		}()
	}
	for i := 0; i < n; i++ {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	var all []error
	for err := range errs {
		all = append(all, err)
	}
	return errors.Join(all...)
}
