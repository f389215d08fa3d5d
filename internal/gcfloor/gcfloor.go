// Package gcfloor gives the Go garbage collector a floor under its heap
// goal. With the default GOGC of 100 the collector runs each time the heap
// doubles its live size; a pipeline whose live heap is a few megabytes
// (batches of small records) then collects dozens of times a second, and
// on the machines Ferry is measured on a fifth of its CPU went to the
// collector and to faulting in the pages it had just returned. Go has no
// setting for a minimum heap goal, so this package watches the live heap
// and raises GOGC while the goal would be below the floor, and lowers it
// back to 100 when the live heap grows: a process with a large live heap
// (big records) keeps the default, and its memory is not doubled.
//
// A GOGC or GOMEMLIMIT the user set in the environment is left alone.
package gcfloor

import (
	"context"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// DefaultFloor is the heap goal the collector is held to at least.
const DefaultFloor = 64 << 20

// maxPercent bounds GOGC while the live heap is tiny.
const maxPercent = 800

// Percent is the GOGC that makes the heap goal at least floor for a live
// heap of live bytes: 100 unless that goal would be below floor.
func Percent(live, floor uint64) int {
	if live == 0 || 2*live >= floor {
		return 100
	}
	return min(maxPercent, int((floor-live)*100/live))
}

// Start adjusts GOGC every interval until ctx ends, unless the environment
// sets GOGC or GOMEMLIMIT. It returns at once; the adjusting runs in its
// own goroutine and restores GOGC 100 when ctx ends.
func Start(ctx context.Context, floor uint64, interval time.Duration) {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	go func() {
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		t := time.NewTicker(interval)
		defer t.Stop()
		set := 100
		defer func() { debug.SetGCPercent(100) }()
		for {
			metrics.Read(sample)
			if sample[0].Value.Kind() == metrics.KindUint64 {
				if p := Percent(sample[0].Value.Uint64(), floor); p != set {
					debug.SetGCPercent(p)
					set = p
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
}
