//go:build unix

package filebench

import (
	"bytes"
	"os"
	"strconv"
)

// resetPeakRSS restarts the kernel's peak resident set count (Linux:
// writing 5 to clear_refs), so peakRSS covers the run only.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS is the peak resident set since resetPeakRSS, in bytes (VmHWM;
// 0 where /proc is not there).
func peakRSS() int64 { return procStatus("VmHWM:") }

// anonRSS is the resident anonymous memory now (RssAnon: the heap and
// stacks, without the pages of the binary itself).
func anonRSS() int64 { return procStatus("RssAnon:") }

// procStatus is a kB field of /proc/self/status, in bytes; 0 where there
// is none.
func procStatus(field string) int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte(field)); ok {
			kb, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
