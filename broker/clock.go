package broker

import "time"

// clock is the time source of the login backoff, so that tests can give
// it a fake one (Config.clock) and read the delays it asks for instead of
// waiting them out.
type clock interface {
	Now() time.Time
	// After is time.After: the channel receives once d has passed.
	After(d time.Duration) <-chan time.Time
}

type systemClock struct{}

func (systemClock) Now() time.Time                         { return time.Now() }
func (systemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
