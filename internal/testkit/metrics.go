package testkit

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Sample is one line of a Prometheus text exposition.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Samples are what one scrape of /metrics returned.
type Samples struct {
	Families map[string]string // metric name → type (counter, gauge, histogram, …)
	Lines    []Sample
}

// Scrape reads the Prometheus text exposition at url (an admin /metrics).
func Scrape(t testing.TB, url string) Samples {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	// Uncompressed: tests scrape often (ScrapeUntil polls), and gzipping
	// the exposition would cost the edge under test more than the scrape.
	req.Header.Set("Accept-Encoding", "identity")
	res, err := HTTP1Client.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(res.Body)
		t.Fatalf("scrape %s: %s: %s", url, res.Status, b)
	}
	s := Samples{Families: map[string]string{}}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# TYPE "); ok {
			if name, typ, ok := strings.Cut(rest, " "); ok {
				s.Families[name] = typ
			}
			continue
		}
		if line == "" || line[0] == '#' {
			continue
		}
		if sample, ok := parseSample(line); ok {
			s.Lines = append(s.Lines, sample)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	return s
}

// parseSample reads `name{k="v",…} value`. Label values with escaped quotes
// are not expected in this project's metrics.
func parseSample(line string) (Sample, bool) {
	series, value, ok := cutLast(line, ' ')
	if !ok {
		return Sample{}, false
	}
	v, err := strconv.ParseFloat(value, 64)
	if err != nil {
		return Sample{}, false
	}
	s := Sample{Labels: map[string]string{}, Value: v}
	name, labels, hasLabels := strings.Cut(series, "{")
	s.Name = name
	if hasLabels {
		for _, kv := range strings.Split(strings.TrimSuffix(labels, "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				s.Labels[k] = strings.Trim(v, `"`)
			}
		}
	}
	return s, true
}

func cutLast(s string, sep byte) (before, after string, ok bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// Has reports whether the scrape exported the metric family name.
func (s Samples) Has(name string) bool {
	_, ok := s.Families[name]
	return ok
}

// Sum adds the values of the samples called name whose labels include
// every pair of labels ("key", "value", …).
func (s Samples) Sum(name string, labels ...string) float64 {
	total := 0.0
	for _, l := range s.Lines {
		if l.Name != name {
			continue
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			match = match && l.Labels[labels[i]] == labels[i+1]
		}
		if match {
			total += l.Value
		}
	}
	return total
}
