package proxy

import (
	"net"
	"testing"
	"time"
)

// deadlines counts the deadlines set on a connection.
type deadlines struct {
	net.Conn
	set []time.Time
}

func (d *deadlines) SetDeadline(t time.Time) error {
	d.set = append(d.set, t)
	return nil
}

// A connection's deadline is set again only when a call needs it earlier,
// or when it is more than backstopSlack later than the call needs; calls a
// moment apart share one, and no call ever has a backstop before its own.
func TestTheBackstopIsSetAgainOnlyOutsideItsSlack(t *testing.T) {
	d := &deadlines{}
	c := newBackendConn(d)
	t0 := time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC)
	for i, step := range []struct {
		need time.Time
		set  bool
	}{
		{t0, true},                                       // the first: set to t0+1s
		{t0.Add(300 * time.Millisecond), false},          // within the slack: shared
		{t0.Add(backstopSlack), false},                   // at its edge: shared
		{t0.Add(backstopSlack + time.Millisecond), true}, // past it: set again
		{t0.Add(-time.Hour), true},                       // a much shorter deadline: lowered
		{t0.Add(-time.Hour + time.Millisecond), false},
	} {
		before := len(d.set)
		if err := setBackstop(c, step.need); err != nil {
			t.Fatal(err)
		}
		if set := len(d.set) > before; set != step.set {
			t.Errorf("call %d: deadline set %v, want %v", i, set, step.set)
		}
		if c.backstop.Before(step.need) || c.backstop.After(step.need.Add(backstopSlack)) {
			t.Errorf("call %d: backstop %v for a call that needs %v", i, c.backstop, step.need)
		}
	}
	if last := d.set[len(d.set)-1]; !last.Equal(c.backstop) {
		t.Errorf("the connection's deadline is %v, the backstop remembered %v", last, c.backstop)
	}
	// A connection of any other kind gets exactly what the call needs.
	other := &deadlines{}
	if err := setBackstop(other, t0); err != nil || len(other.set) != 1 || !other.set[0].Equal(t0) {
		t.Errorf("another connection got %v (%v), want %v", other.set, err, t0)
	}
}
