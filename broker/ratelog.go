package broker

import "time"

// logQuota lets a recurring log line through at most once per interval
// and counts the occurrences it held back, so the line that does go out
// can say how many it stands for. It has no lock: its owner guards it.
type logQuota struct {
	last time.Time // when a line last went out; zero = never
	held int       // occurrences since then
}

// allow records one occurrence at now and reports whether to log it, and
// how many occurrences (this one included) the line stands for.
func (q *logQuota) allow(now time.Time, every time.Duration) (count int, ok bool) {
	q.held++
	if !q.last.IsZero() && now.Sub(q.last) < every {
		return 0, false
	}
	count, q.held, q.last = q.held, 0, now
	return count, true
}
