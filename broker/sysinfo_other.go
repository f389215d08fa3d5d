//go:build !linux && !darwin

package broker

func diskSpace(string) (free, total uint64) { return 0, 0 }

func cpuSeconds() float64 { return 0 }
