// Package units parses the durations and byte sizes that configuration
// files, connection strings and the CLI write: humantime durations such as
// "250ms", "5s" or "1h 30m", and sizes such as "64MiB" or "1GB". It is
// the one place they are parsed: iggy/wire (string-valued topic options),
// iggy (connection strings), the CLI, config and connector use it.
package units

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// Unlimited is what ParseSize returns for "unlimited", "none" and "never",
// and ParseExpiry for "none", "never" and "unlimited".
const Unlimited = math.MaxUint64

var durationUnits = map[string]time.Duration{
	"ns": time.Nanosecond, "nsec": time.Nanosecond, "nanos": time.Nanosecond,
	"us": time.Microsecond, "µs": time.Microsecond, "usec": time.Microsecond, "micros": time.Microsecond,
	"ms": time.Millisecond, "msec": time.Millisecond, "millis": time.Millisecond,
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
	"w": 7 * 24 * time.Hour, "week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
	"month": 2630016 * time.Second, "months": 2630016 * time.Second,
	"y": 31557600 * time.Second, "year": 31557600 * time.Second, "years": 31557600 * time.Second,
}

// ParseExpiry parses a message expiry as the Iggy CLI and server accept it:
// a duration such as "1d", "2h 30m", "15days" or "500ms", one of "none",
// "never", "unlimited" (Unlimited: never expires) or "server_default",
// "default" (0: the server's default), or a plain number of microseconds.
// It returns microseconds.
func ParseExpiry(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "none", "never", "unlimited":
		return Unlimited, nil
	case "server_default", "default":
		return 0, nil
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		return n, nil
	}
	d, err := ParseDuration(t)
	if err != nil {
		return 0, err
	}
	return uint64(d / time.Microsecond), nil
}

// ParseDuration parses a sequence of <number><unit> parts, optionally
// separated by spaces ("1h 30m", "2days", "250ms"), humantime style. Go
// duration strings such as "1h30m" are accepted too, and so is "0" alone
// (zero needs no unit).
func ParseDuration(s string) (time.Duration, error) {
	rest := strings.TrimSpace(s)
	if rest == "" {
		return 0, fmt.Errorf("duration %q is empty", s)
	}
	if strings.Trim(rest, "0") == "" {
		return 0, nil
	}
	var total time.Duration
	for rest != "" {
		i := strings.IndexFunc(rest, func(r rune) bool { return !unicode.IsDigit(r) })
		if i == 0 {
			return 0, fmt.Errorf("duration %q: expected a number at %q (e.g. \"5s\", \"1h 30m\")", s, rest)
		}
		if i < 0 {
			return 0, fmt.Errorf("duration %q: %q has no unit (use ms, s, m, h, d, w)", s, rest)
		}
		n, err := strconv.ParseUint(rest[:i], 10, 63)
		if err != nil {
			return 0, fmt.Errorf("duration %q: %w", s, err)
		}
		rest = strings.TrimLeft(rest[i:], " ")
		j := strings.IndexFunc(rest, func(r rune) bool { return unicode.IsDigit(r) || r == ' ' })
		if j < 0 {
			j = len(rest)
		}
		unit, ok := durationUnits[rest[:j]]
		if !ok {
			return 0, fmt.Errorf("duration %q: unknown unit %q (use ms, s, m, h, d, w)", s, rest[:j])
		}
		if n > uint64(math.MaxInt64/int64(unit)) || total > math.MaxInt64-time.Duration(n)*unit {
			return 0, fmt.Errorf("duration %q overflows", s)
		}
		total += time.Duration(n) * unit
		rest = strings.TrimLeft(rest[j:], " ")
	}
	return total, nil
}

// FormatDuration renders d the way configuration files write durations:
// "5ms", "1s", "1h 30m", "1s 500ms"; zero is "0s".
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var parts []string
	if d < 0 {
		d = -d
		parts = append(parts, "-")
	}
	for _, u := range []struct {
		d    time.Duration
		name string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}, {time.Nanosecond, "ns"}} {
		if n := d / u.d; n > 0 {
			parts = append(parts, strconv.FormatInt(int64(n), 10)+u.name)
			d -= n * u.d
		}
	}
	return strings.Join(parts, " ")
}

var sizeUnits = map[string]uint64{
	"": 1, "b": 1,
	"kb": 1e3, "mb": 1e6, "gb": 1e9, "tb": 1e12,
	"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
}

// ParseSize parses a byte size such as "1GB", "512 MiB", "100KB" or a
// plain number of bytes; "unlimited", "none" and "never" give Unlimited.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "unlimited", "none", "never":
		return Unlimited, nil
	case "":
		return 0, fmt.Errorf("size %q is empty", s)
	}
	i := strings.IndexFunc(t, func(r rune) bool { return !unicode.IsDigit(r) && r != '.' })
	if i < 0 {
		i = len(t)
	}
	if i == 0 {
		return 0, fmt.Errorf("size %q: expected a number (e.g. \"1GB\", \"512MiB\")", s)
	}
	num, err := strconv.ParseFloat(t[:i], 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %w", s, err)
	}
	unit, ok := sizeUnits[strings.TrimSpace(t[i:])]
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KB, MB, GB, KiB, MiB, GiB)", s, strings.TrimSpace(t[i:]))
	}
	v := num * float64(unit)
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q overflows", s)
	}
	return uint64(v), nil
}

// FormatSize renders n in the largest unit, binary or decimal, that
// divides it: "64MiB", "64MB", "4KiB", "1500B".
func FormatSize(n uint64) string {
	for _, u := range []struct {
		n    uint64
		name string
	}{{1 << 40, "TiB"}, {1e12, "TB"}, {1 << 30, "GiB"}, {1e9, "GB"}, {1 << 20, "MiB"}, {1e6, "MB"}, {1 << 10, "KiB"}, {1e3, "KB"}} {
		if n >= u.n && n%u.n == 0 {
			return strconv.FormatUint(n/u.n, 10) + u.name
		}
	}
	return strconv.FormatUint(n, 10) + "B"
}
