package gcfloor

import (
	"context"
	"runtime"
	"runtime/debug"
	"testing"
	"time"
)

func TestPercentHoldsTheGoalAtTheFloor(t *testing.T) {
	const floor = 64 << 20
	for _, c := range []struct {
		live uint64
		want int
	}{
		{0, 100},              // nothing measured yet
		{32 << 20, 100},       // goal 64 MiB already
		{100 << 20, 100},      // big heap: the default
		{16 << 20, 300},       // goal 16 × 4 = 64 MiB
		{8 << 20, 700},        // 8 × 8
		{1 << 20, 800},        // bounded
		{(32 << 20) - 1, 100}, // just under: GOGC 100 gives 64 MiB - 2 B, close enough
	} {
		got := Percent(c.live, floor)
		if c.live == (32<<20)-1 {
			if got < 100 || got > 101 {
				t.Errorf("Percent(%d) = %d, want about 100", c.live, got)
			}
			continue
		}
		if got != c.want {
			t.Errorf("Percent(%d) = %d, want %d", c.live, got, c.want)
		}
		if got > 100 && got < maxPercent && c.live*uint64(100+got)/100 < floor-c.live/100 {
			t.Errorf("Percent(%d) = %d: goal %d below the floor", c.live, got, c.live*uint64(100+got)/100)
		}
	}
}

// With a small live heap Start raises GOGC, and puts it back when done;
// with GOGC in the environment it changes nothing.
func TestStartRaisesGOGCForASmallHeapAndRestoresIt(t *testing.T) {
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	runtime.GC() // the live heap is measured by a collection
	ctx, cancel := context.WithCancel(context.Background())
	Start(ctx, 1<<40, time.Millisecond) // any heap is small against 1 TiB
	deadline := time.Now().Add(10 * time.Second)
	for gogc() <= 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC still %d", gogc())
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	for gogc() != 100 {
		if time.Now().After(deadline) {
			t.Fatalf("GOGC %d after the end, want 100", gogc())
		}
		time.Sleep(time.Millisecond)
	}

	t.Setenv("GOGC", "150")
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	debug.SetGCPercent(150)
	Start(ctx, 1<<40, time.Millisecond)
	time.Sleep(20 * time.Millisecond)
	if g := gogc(); g != 150 {
		t.Fatalf("GOGC %d, want the environment's 150 untouched", g)
	}
	debug.SetGCPercent(100)
}

// gogc reads GOGC without changing it.
func gogc() int {
	p := debug.SetGCPercent(100)
	debug.SetGCPercent(p)
	return p
}
