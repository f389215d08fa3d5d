package runtime

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// errDrainTimeout is the cause of a drain context that ran out of time.
var errDrainTimeout = errors.New("in-flight work was not finished in time after the stop")

// drainContext returns the context in which sources and sinks finish the
// work they have in flight when they are stopped: it carries ctx's values
// but not its cancellation, and ends grace after ctx ends (its cause then
// says so), or when cancel is called. A stop thus lets a polled batch be
// delivered, written and committed, but not forever.
func drainContext(ctx context.Context, grace time.Duration) (context.Context, context.CancelFunc) {
	work, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(grace, func() { cancel(fmt.Errorf("%w (%s)", errDrainTimeout, grace)) })
		context.AfterFunc(work, func() { t.Stop() })
	})
	return work, func() {
		stop()
		cancel(context.Canceled)
	}
}
