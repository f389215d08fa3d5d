package cputime

import (
	"runtime"
	"testing"
)

var sink int

// Work done shows in Process.
func TestProcessGrowsWithWork(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("not measured here")
	}
	before := Process()
	if before <= 0 {
		t.Fatalf("Process() = %s at the start of a test binary", before)
	}
	for i := range 200_000_000 {
		sink += i
	}
	if after := Process(); after <= before {
		t.Fatalf("Process() %s after work, %s before", after, before)
	}
}
