// Package topk keeps the subjects the limit step refused most in the last
// minutes, for the admin listener's page: a fixed number of counters per
// minute (the space-saving algorithm), so that a flood of distinct subjects
// costs no more memory than one subject does.
//
// It is not a metric: Prometheus never gets a series per subject. Counts
// are this replica's, exact while a minute saw at most Capacity refused
// subjects and over-estimated by at most Subject.Over past that, and
// forgotten after Windows minutes. Only refused calls touch it.
package topk

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Bounds: Capacity subjects counted per one-minute window, Windows windows
// kept. Memory is Capacity × Windows entries, whatever the traffic.
const (
	Capacity = 64
	Windows  = 5
)

// Refusals counts refusals by subject. The zero value is not usable: call
// New. It is safe for concurrent use.
type Refusals struct {
	now     func() time.Time
	mu      sync.Mutex
	windows [Windows]window
}

// window is one minute's counters.
type window struct {
	minute  int64 // Unix minute it counts; 0: never used
	n       int
	entries [Capacity]entry
	index   map[string]int // subject → entries[i]
}

type entry struct {
	subject, plan, limit string
	count, over          uint64
}

// New returns an empty Refusals.
func New() *Refusals {
	r := &Refusals{now: time.Now}
	for i := range r.windows {
		r.windows[i].index = make(map[string]int, Capacity)
	}
	return r
}

// Refused counts one refusal of subject, on plan, by limit. A subject new
// to a full window takes the place of the one counted least, with that
// count plus one (space-saving): whoever is refused often stays, whoever
// was refused once may leave. It allocates nothing once the window's
// index has grown to Capacity.
func (r *Refusals) Refused(subject, plan, limit string) {
	minute := r.now().Unix() / 60
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &r.windows[minute%Windows]
	if w.minute != minute {
		w.minute, w.n = minute, 0
		clear(w.index)
	}
	if i, ok := w.index[subject]; ok {
		e := &w.entries[i]
		e.count++
		e.plan, e.limit = plan, limit
		return
	}
	i := w.n
	var least uint64
	if w.n < Capacity {
		w.n++
	} else {
		i = 0
		for j := 1; j < Capacity; j++ {
			if w.entries[j].count < w.entries[i].count {
				i = j
			}
		}
		least = w.entries[i].count
		delete(w.index, w.entries[i].subject)
	}
	w.entries[i] = entry{subject: subject, plan: plan, limit: limit, count: least + 1, over: least}
	w.index[subject] = i
}

// Subject is one subject's refusals over the windows kept.
type Subject struct {
	Subject string `json:"subject"`
	// Refused counts its refusals; at most Over of them may be another
	// subject's, counted before it took that one's place.
	Refused uint64 `json:"refused"`
	Over    uint64 `json:"over,omitempty"`
	// Plan and Limit are those of its latest refusal.
	Plan  string `json:"plan"`
	Limit string `json:"limit"`
}

// Top returns the n subjects refused most in the last Windows minutes
// (this one included), most first.
func (r *Refusals) Top(n int) []Subject {
	minute := r.now().Unix() / 60
	by := map[string]*Subject{}
	latest := map[string]int64{}
	r.mu.Lock()
	for wi := range r.windows {
		w := &r.windows[wi]
		if w.minute <= minute-Windows || w.minute > minute {
			continue
		}
		for _, e := range w.entries[:w.n] {
			s := by[e.subject]
			if s == nil {
				s = &Subject{Subject: e.subject}
				by[e.subject] = s
			}
			s.Refused += e.count
			s.Over += e.over
			if w.minute >= latest[e.subject] {
				latest[e.subject], s.Plan, s.Limit = w.minute, e.plan, e.limit
			}
		}
	}
	r.mu.Unlock()
	out := make([]Subject, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Subject) int {
		if c := cmp.Compare(b.Refused, a.Refused); c != 0 {
			return c
		}
		return cmp.Compare(a.Subject, b.Subject)
	})
	return out[:min(n, len(out))]
}
