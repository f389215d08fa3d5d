package wire

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/ferryhq/ferry/internal/units"
)

// Unlimited is the u64 sentinel for "never expires" and "no size limit".
const Unlimited = math.MaxUint64

// ParseExpiry parses a message expiry as the Iggy CLI and server accept it:
// a humantime duration such as "1d", "2h 30m", "15days" or "500ms", or one
// of "none", "never", "unlimited" (never expires), or a plain number of
// microseconds. It returns microseconds.
func ParseExpiry(s string) (uint64, error) {
	t := strings.TrimSpace(strings.ToLower(s))
	switch t {
	case "none", "never", "unlimited", "server_default", "default":
		if t == "server_default" || t == "default" {
			return 0, nil
		}
		return Unlimited, nil
	}
	if n, err := strconv.ParseUint(t, 10, 64); err == nil {
		return n, nil
	}
	d, err := ParseHumanDuration(t)
	if err != nil {
		return 0, err
	}
	return uint64(d / time.Microsecond), nil
}

// ParseHumanDuration parses a sequence of <number><unit> parts, optionally
// separated by spaces ("1h 30m", "2days", "250ms"), humantime style. Go
// duration strings such as "1h30m" are accepted too, and "0" alone. See
// internal/units, where Ferry parses every duration.
func ParseHumanDuration(s string) (time.Duration, error) { return units.ParseDuration(s) }

// ParseSize parses a byte size such as "1GB", "512 MiB", "100KB" or a
// plain number of bytes; "unlimited" and "none" give Unlimited.
func ParseSize(s string) (uint64, error) { return units.ParseSize(s) }
