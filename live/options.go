package live

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"time"
)

// ErrInvalidOption is wrapped by every error about an option or argument
// given to Stream, Map or Target.
var ErrInvalidOption = errors.New("live: invalid option")

// Defaults of the reading options.
const (
	DefaultBatchLength       = 100
	DefaultPollInterval      = 300 * time.Millisecond
	DefaultInitRetryInterval = time.Second
)

// StreamOption configures Handle.Stream.
type StreamOption interface{ applyStream(*streamConfig) }

// MapOption configures Handle.Map.
type MapOption interface{ applyMap(*mapConfig) }

// TargetOption configures Handle.Target.
type TargetOption interface{ applyTarget(*targetConfig) }

// ReadOption configures both Streams and Maps.
type ReadOption interface {
	StreamOption
	MapOption
}

// PartitionOption configures both Maps and Targets.
type PartitionOption interface {
	MapOption
	TargetOption
}

// pollConfig is what Streams and Maps share.
type pollConfig struct {
	batchLength   int
	pollInterval  time.Duration
	retryInterval time.Duration
	initRetries   int
	initInterval  time.Duration
	logger        *slog.Logger
}

func defaultPollConfig() pollConfig {
	return pollConfig{
		batchLength:  DefaultBatchLength,
		pollInterval: DefaultPollInterval,
		initInterval: DefaultInitRetryInterval,
		logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

func (c *pollConfig) validate() []error {
	var errs []error
	if c.batchLength < 1 || c.batchLength > math.MaxUint32 {
		errs = append(errs, fmt.Errorf("%w: batch length %d, want 1 or more", ErrInvalidOption, c.batchLength))
	}
	if c.pollInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: poll interval %s, want more than 0", ErrInvalidOption, c.pollInterval))
	}
	if c.retryInterval < 0 {
		errs = append(errs, fmt.Errorf("%w: retry interval %s, want 0 (fail on the first error) or more", ErrInvalidOption, c.retryInterval))
	}
	if c.initRetries < 0 {
		errs = append(errs, fmt.Errorf("%w: init retries %d, want 0 or more", ErrInvalidOption, c.initRetries))
	}
	if c.initInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: init retry interval %s, want more than 0", ErrInvalidOption, c.initInterval))
	}
	if c.logger == nil {
		errs = append(errs, fmt.Errorf("%w: nil logger", ErrInvalidOption))
	}
	return errs
}

type readOption func(*pollConfig)

func (f readOption) applyStream(c *streamConfig) { f(&c.pollConfig) }
func (f readOption) applyMap(c *mapConfig)       { f(&c.pollConfig) }

// WithBatchLength sets the most messages one poll asks for. Default 100.
func WithBatchLength(n int) ReadOption {
	return readOption(func(c *pollConfig) { c.batchLength = n })
}

// WithPollInterval sets how long to wait after a poll that found nothing
// new before polling again. Default 300ms.
func WithPollInterval(d time.Duration) ReadOption {
	return readOption(func(c *pollConfig) { c.pollInterval = d })
}

// WithRetryInterval makes a failed poll (or offset store) be retried after
// d instead of ending the read: the error is logged and reading goes on,
// the client reconnecting under it as needed. Default 0: the first error
// is returned to the caller.
func WithRetryInterval(d time.Duration) ReadOption {
	return readOption(func(c *pollConfig) { c.retryInterval = d })
}

// WithInitRetries sets how many more times starting looks for the stream
// and topic when they do not exist yet, waiting WithInitRetryInterval
// between looks. Default 0: a missing stream or topic fails at once.
func WithInitRetries(n int) ReadOption {
	return readOption(func(c *pollConfig) { c.initRetries = n })
}

// WithInitRetryInterval sets the wait between WithInitRetries looks.
// Default 1s.
func WithInitRetryInterval(d time.Duration) ReadOption {
	return readOption(func(c *pollConfig) { c.initInterval = d })
}

// WithLogger sends retries and other noteworthy events to l. Default:
// discarded.
func WithLogger(l *slog.Logger) ReadOption {
	return readOption(func(c *pollConfig) { c.logger = l })
}

type streamConfig struct {
	pollConfig
	allowReplay bool
}

type streamOption func(*streamConfig)

func (f streamOption) applyStream(c *streamConfig) { f(c) }

// WithAllowReplay lets the group's stored offset move backwards and
// delivers messages again that the poll returns a second time (after a
// reconnect or a rebalance re-reads from the stored offset). Default off:
// a partition never delivers an offset at or below one it already
// delivered or knows to be stored, and never stores an offset lower than
// the stored one.
func WithAllowReplay() StreamOption {
	return streamOption(func(c *streamConfig) { c.allowReplay = true })
}

type mapConfig struct {
	pollConfig
	partition uint32
	deleted   func(Message) bool
}

type mapOption func(*mapConfig)

func (f mapOption) applyMap(c *mapConfig) { f(c) }

// WithDeletion sets the predicate that marks a message as the deletion of
// its key. IsDeleted recognises the markers a Target sends. Default: no
// message deletes.
func WithDeletion(isDeletion func(Message) bool) MapOption {
	return mapOption(func(c *mapConfig) { c.deleted = isDeletion })
}

type partitionOption uint32

func (p partitionOption) applyMap(c *mapConfig)       { c.partition = uint32(p) }
func (p partitionOption) applyTarget(c *targetConfig) { c.partition = uint32(p) }

// WithPartition sets the partition a Map reads or a Target writes.
// Default 0.
func WithPartition(id uint32) PartitionOption { return partitionOption(id) }

type targetConfig struct {
	partition     uint32
	deletionValue DeletionValueFunc
	store         Store
	stores        int
}

type targetOption func(*targetConfig)

func (f targetOption) applyTarget(c *targetConfig) { f(c) }

// DeletionValueFunc makes the payload of the deletion marker for a key
// that was published before and is not declared now. Iggy messages need a
// payload (there are no empty tombstones), so a Target without one cannot
// delete: Apply returns ErrNoDeletionValue.
type DeletionValueFunc func(k Key) ([]byte, error)

// WithDeletionValue sets the function that makes deletion markers.
// Default: none (a deletion is an error).
func WithDeletionValue(fn DeletionValueFunc) TargetOption {
	return targetOption(func(c *targetConfig) { c.deletionValue = fn })
}

// WithStateFile keeps the target's published state in the file at path,
// replaced atomically on every Apply (see FileStore). A Target needs
// exactly one of WithStateFile and WithStore.
func WithStateFile(path string) TargetOption {
	return targetOption(func(c *targetConfig) { c.store = FileStore(path); c.stores++ })
}

// WithStore keeps the target's published state in s (NewMemoryStore for
// state that ends with the program, or the caller's own Store).
func WithStore(s Store) TargetOption {
	return targetOption(func(c *targetConfig) { c.store = s; c.stores++ })
}
