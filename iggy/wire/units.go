package wire

import "math"

// Unlimited is the u64 sentinel for "never expires" and "no size limit".
// String-valued topic options are parsed by package internal/units, as
// Ferry parses every duration and size.
const Unlimited = math.MaxUint64
