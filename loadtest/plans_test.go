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
			why := strings.Join(judge(a, tc.sent, tc.admitted, tc.unfinished), "; ")
			if tc.fail == "" && why != "" || tc.fail != "" && !strings.Contains(why, tc.fail) {
				t.Fatalf("judge = %q, want %q", why, tc.fail)
			}
		})
	}
}

func TestOperationLimitsAllowExactlyTheirBurstWithinHalfAnInterval(t *testing.T) {
	a := sequentialAllowance(30, 300*time.Millisecond) // one every 2s
	if a.Allowed != 30 || a.Tolerance != 0 {
		t.Fatalf("30/min over 300ms: %+v, want exactly 30", a)
	}
	if why := judge(a, 32, 31, 0); len(why) == 0 {
		t.Fatal("a 31st admission within 300ms passed")
	}
	if a := sequentialAllowance(30, 1500*time.Millisecond); a.Tolerance != 1 {
		t.Fatalf("over 1.5s the clock may add one: %+v", a)
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
