package main

import (
	"runtime/debug"
	"testing"
)

func TestTheCollectorRunsAtGOGC400UnlessGOGCIsSet(t *testing.T) {
	before := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(before) })

	tuneGC(func(string) string { return "" })
	if got := gcPercent(); got != defaultGCPercent {
		t.Errorf("GOGC unset: the collector's target is %d, want %d", got, defaultGCPercent)
	}

	debug.SetGCPercent(150) // what the runtime made of GOGC=150
	tuneGC(func(name string) string {
		if name == "GOGC" {
			return "150"
		}
		return ""
	})
	if got := gcPercent(); got != 150 {
		t.Errorf("GOGC=150: the collector's target is %d, want the operator's 150", got)
	}
}
