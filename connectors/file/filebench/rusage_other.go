//go:build !unix

package filebench

// Memory is not measured on this system.
func resetPeakRSS()  {}
func peakRSS() int64 { return 0 }
func anonRSS() int64 { return 0 }
