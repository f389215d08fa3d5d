//go:build !unix

package filebench

import (
	rt "runtime"
	"time"
)

// cpuTime is not measured on this system.
func cpuTime() time.Duration { return 0 }

func runtimeGC()     { rt.GC() }
func resetPeakRSS()  {}
func peakRSS() int64 { return 0 }
func anonRSS() int64 { return 0 }
