package main

import (
	"strings"
	"testing"
	"time"
)

func TestAPlanAllowsItsBurstPlusOneRequestPerEmissionInterval(t *testing.T) {
	free := Plan{Name: "free", RatePerMinute: 60, Burst: 100, Daily: 10000}
	pro := Plan{Name: "pro", RatePerMinute: 300, Burst: 500, Daily: 100000}
	enterprise := Plan{Name: "enterprise", RatePerMinute: 1000, Burst: 2000}
	tests := []struct {
		name      string
		plan      Plan
		start     int
		span      time.Duration
		dailyLeft int
		allowed   int
		daily     bool
	}{
		{"free over 20s", free, 100, 20 * time.Second, 10000, 120, false},
		{"free, just short of the next interval", free, 100, 20*time.Second - time.Millisecond, 10000, 119, false},
		{"pro over 15s (one every 200ms)", pro, 500, 15 * time.Second, 100000, 575, false},
		{"enterprise over 20s (one every 60ms)", enterprise, 2000, 20 * time.Second, -1, 2333, false},
		{"a used burst", free, 40, 10 * time.Second, 10000, 50, false},
		{"the daily cap binds", free, 100, 20 * time.Second, 30, 30, true},
		{"no time at all", free, 99, 0, -1, 99, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := allowance(tc.plan, tc.start, tc.span, tc.dailyLeft)
			if a.Allowed != tc.allowed || a.DailyReached != tc.daily {
				t.Fatalf("allowance = %d (daily reached %v), want %d (%v)", a.Allowed, a.DailyReached, tc.allowed, tc.daily)
			}
		})
	}
}

func TestToleranceIsOnePercentOrOneRequestPlusOneIntervalOfTiming(t *testing.T) {
	for _, tc := range []struct{ allowed, want int }{
		{0, 2}, {12, 2}, {100, 2}, {101, 3}, {120, 3}, {575, 7}, {2333, 25},
	} {
		if got := tolerance(tc.allowed); got != tc.want {
			t.Errorf("tolerance(%d) = %d, want %d", tc.allowed, got, tc.want)
		}
	}
}

func TestVerdictFailsOverAndUnderAdmissionBeyondTheTolerance(t *testing.T) {
	a := allowance(Plan{RatePerMinute: 60, Burst: 100}, 100, 20*time.Second, -1) // 120 ± 3
	tests := []struct {
		name                       string
		sent, admitted, unfinished int
		fail                       string
	}{
		{"exact", 240, 120, 0, ""},
		{"upper edge of the tolerance", 240, 123, 0, ""},
		{"over-admission", 240, 124, 0, "more than allowed"},
		{"lower edge", 240, 117, 0, ""},
		{"over-refusal", 240, 116, 0, "fewer than allowed"},
		{"unfinished calls may have been admitted", 240, 115, 3, ""},
		{"fewer sent than allowed", 50, 50, 0, ""},
		{"fewer sent, some refused", 50, 40, 0, "fewer than allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := strings.Join(judge(a, a, tc.sent, tc.admitted, tc.unfinished), "; ")
			if tc.fail == "" && why != "" || tc.fail != "" && !strings.Contains(why, tc.fail) {
				t.Fatalf("judge = %q, want %q", why, tc.fail)
			}
		})
	}
}

func TestAPlanMayAdmitUpToTheLastAdmittedCallsAnswer(t *testing.T) {
	p := Plan{RatePerMinute: 60, Burst: 100}
	bySend := allowance(p, 100, 20*time.Second, -1)   // the last send at 20s: 120 ± 3
	byAnswer := allowance(p, 100, 25*time.Second, -1) // served and answered at 25s on a loaded machine: 125 ± 3
	if why := judge(byAnswer, bySend, 240, 127, 0); len(why) > 0 {
		t.Fatalf("127 admitted by 25s: %q", why)
	}
	if why := judge(bySend, bySend, 240, 127, 0); len(why) == 0 {
		t.Fatal("judged by the sends, 127 admitted should fail: the test no longer shows the difference")
	}
	if why := judge(byAnswer, bySend, 240, 129, 0); len(why) == 0 {
		t.Fatal("129 admitted by 25s passed")
	}
}

func TestOperationLimitsAreJudgedByWhenTheEdgeCanHaveAdmittedEachCall(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	// 10/min: one more every 6s. Ten calls admitted within the first
	// 100ms, answered 5ms after their send.
	burst := func() []timedCall {
		var calls []timedCall
		for i := range 10 {
			calls = append(calls, timedCall{sent: at(10 * i), answered: at(10*i + 5), admitted: true})
		}
		return calls
	}
	tests := []struct {
		name  string
		calls []timedCall
		fail  string
	}{
		{"then two refused", append(burst(), timedCall{at(100), at(105), false}, timedCall{at(110), at(115), false}), ""},
		// The run: the 11th sent at 2.9s, served late and answered
		// at 6.2s, admitted; the run ended before a 12th. Judged by the
		// send times (2.9s: the burst only) it was over-admission.
		{"11th sent early, served after the interval", append(burst(), timedCall{at(2900), at(6200), true}), ""},
		{"11th admitted before the interval", append(burst(), timedCall{at(2900), at(5000), true}), "admitted 11, more than allowed 10"},
		{"9 admitted", append(burst()[:9], timedCall{at(90), at(95), false}, timedCall{at(100), at(105), false}), "admitted 9 of 11 calls, fewer than allowed 10"},
		{"12th sent after the interval, refused", append(burst(), timedCall{at(100), at(105), false}, timedCall{at(6200), at(6205), false}), "fewer than allowed 11"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			why := strings.Join(judgeSequential(10, tc.calls), "; ")
			if tc.fail == "" && why != "" || tc.fail != "" && !strings.Contains(why, tc.fail) {
				t.Fatalf("judgeSequential = %q, want %q", why, tc.fail)
			}
		})
	}
}

func TestConformanceOffersOverloadTimesWhatThePlanAllowsAtAnEvenPace(t *testing.T) {
	p := Plan{Name: "free", RatePerMinute: 60, Burst: 100}
	at := conformanceSchedule(p, 20*time.Second, 2)
	n := 0
	var last time.Duration
	for i := 0; ; i++ {
		d, ok := at(i)
		if !ok {
			break
		}
		if i > 0 && d <= last {
			t.Fatalf("call %d at %v, not after %v", i, d, last)
		}
		last, n = d, n+1
	}
	if want := 2 * (100 + 20); n < want-1 || n > want+1 {
		t.Fatalf("%d calls offered over 20s, want about %d", n, want)
	}
}

func TestPlansFlag(t *testing.T) {
	plans, err := parsePlans(defaultPlans)
	if err != nil || len(plans) != 3 || plans[2] != (Plan{Name: "enterprise", RatePerMinute: 1000, Burst: 2000}) {
		t.Fatalf("default plans: %v %v", plans, err)
	}
	for _, bad := range []string{"", "tiny", "tiny=60/10", "tiny=0/10/0", "tiny=60/0/0", "tiny=60/x/0", "Tiny=60/10/0", "a=1/1/0,a=2/2/0", "tiny=60/10/-1"} {
		if _, err := parsePlans(bad); err == nil {
			t.Errorf("parsePlans(%q) accepted", bad)
		}
	}
}
