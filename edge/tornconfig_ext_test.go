package edge_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/orgedge/edge/config"
	"github.com/orgedge/edge/edge/admin"
	"github.com/orgedge/edge/internal/testkit"
)

// tornPolicy is one whole policy of the racing-writer test: every number
// differs from the other policy's, and cutting any of them short (301 to
// 30) gives a number neither has.
func tornPolicy(n int) map[string]config.Plan {
	return map[string]config.Plan{
		"free": {RequestsPerMinute: 60 + n, RequestsPerDay: 10_000 + config.Count(n), Burst: 100 + n, Quotas: config.Quotas{
			ConcurrentEnvironments: 2 + config.Count(n), EnvironmentsPerMonth: 10 + config.Count(n), VCPUHoursPerMonth: 100 + config.Amount(n), MemoryGBHoursPerMonth: 200 + config.Amount(n)}},
		"pro": {RequestsPerMinute: 300 + n, RequestsPerDay: 100_000 + config.Count(n), Burst: 500 + n, Quotas: config.Quotas{
			ConcurrentEnvironments: 7 + config.Count(n), EnvironmentsPerMonth: 17 + config.Count(n), VCPUHoursPerMonth: 170 + config.Amount(n), MemoryGBHoursPerMonth: 340 + config.Amount(n)}},
	}
}

// planView is what the operator API shows of one plan: its limits and
// quotas, not the subject's use of them.
func planView(t *testing.T, adminURL, plan string) (string, error) {
	t.Helper()
	code, body := adminCall(t, "GET", adminURL, "/admin/v1/subjects/torn-check?plan="+plan, "")
	if code != http.StatusOK {
		return "", fmt.Errorf("inspect ?plan=%s: %d %s", plan, code, body)
	}
	var st admin.SubjectState
	if err := json.Unmarshal(body, &st); err != nil {
		return "", err
	}
	i := slices.IndexFunc(st.Limits, func(l admin.LimitState) bool { return l.Name == "plan" })
	if i < 0 || st.Daily == nil {
		return "", fmt.Errorf("inspect ?plan=%s: no plan limit or daily cap: %s", plan, body)
	}
	return fmt.Sprintf("rate %d burst %d daily %d quotas %+v",
		st.Limits[i].RequestsPerMinute, st.Limits[i].Burst, st.Daily.Limit, st.Environments.Quotas), nil
}

// writeInPlace writes content over the file at path in pieces, pausing
// between them, as a slow editor or a copy over the network does: a reader
// meanwhile sees it half-written.
func writeInPlace(t *testing.T, path string, content []byte, rng *rand.Rand) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	for len(content) > 0 {
		n := min(len(content), 1+rng.IntN(len(content)/4+1))
		if _, err := f.Write(content[:n]); err != nil {
			t.Error(err)
			return
		}
		content = content[n:]
		time.Sleep(time.Duration(5+rng.IntN(35)) * time.Millisecond)
	}
}

func TestAReloadRacingAWriterNeverAppliesAHalfWrittenPolicy(t *testing.T) {
	t.Parallel()
	s := startFromFile(t, func(c *config.Config) { c.Limits.Plans = tornPolicy(1) })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	hup := make(chan os.Signal, 1)
	go s.edge.App.WatchConfig(ctx, s.path, 5*time.Millisecond, hup)

	// What the operator API shows under each whole policy.
	views := map[string]map[string]bool{"free": {}, "pro": {}}
	see := func(n int) map[string]string {
		got := map[string]string{}
		testkit.WaitFor(t, fmt.Sprintf("policy %d applied", n), func() bool {
			for plan := range views {
				v, err := planView(t, s.edge.AdminURL, plan)
				if err != nil {
					return false
				}
				got[plan] = v
			}
			want := tornPolicy(n)
			return hasRate(got["free"], want["free"].RequestsPerMinute) && hasRate(got["pro"], want["pro"].RequestsPerMinute)
		})
		return got
	}
	policy := func(n int) []byte {
		next := *s.edge.Config
		next.Limits.Plans = tornPolicy(n)
		return []byte(next.String())
	}
	for plan, v := range see(1) {
		views[plan][v] = true
	}
	next := *s.edge.Config
	next.Limits.Plans = tornPolicy(2)
	writeConfig(t, s.path, &next) // whole, renamed into place
	for plan, v := range see(2) {
		views[plan][v] = true
	}

	// Now a writer rewrites the file in place, in pieces, alternating the
	// two policies, while the edge polls it every 5ms and SIGHUPs arrive;
	// meanwhile an operator keeps looking at both plans. Every look must
	// find one whole policy or the other.
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Go(func() {
		defer close(done)
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 6 {
			writeInPlace(t, s.path, policy(1+i%2), rng)
			time.Sleep(200 * time.Millisecond) // the file rests whole: forty of the edge's 5ms polls
		}
	})
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			case hup <- os.Interrupt:
			default:
			}
			time.Sleep(10 * time.Millisecond)
		}
	})
	looks := 0
	for {
		select {
		case <-done:
		default:
			for plan := range views {
				v, err := planView(t, s.edge.AdminURL, plan)
				looks++
				switch {
				case err != nil:
					t.Fatalf("look %d, while the file was being written: %v", looks, err)
				case !views[plan][v]:
					t.Fatalf("look %d, while the file was being written: plan %s shows %s, which is neither whole policy's %v",
						looks, plan, v, views[plan])
				}
			}
			continue
		}
		break
	}
	wg.Wait()
	see(2) // the last version written (i = 5) applies once whole
	t.Logf("%d looks while the file was written in place", looks)
}

// hasRate reports whether a plan's view shows the rate.
func hasRate(view string, rate int) bool {
	var r int
	_, err := fmt.Sscanf(view, "rate %d", &r)
	return err == nil && r == rate
}
