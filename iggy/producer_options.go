package iggy

import "time"

// ProducerOption configures a Producer.
type ProducerOption interface{ applyProducer(*producerConfig) }

type producerOption func(*producerConfig)

func (f producerOption) applyProducer(c *producerConfig) { f(c) }

type producerConfig struct {
	batchLength  int
	batchBytes   int
	linger       time.Duration
	maxMessages  int
	maxBytes     int
	partitioning Partitioning
	key          func(*Message) []byte
	retries      int
	sendTimeout  time.Duration
}

// WithBatchLength sets the most messages in one batch. Default 1000.
func WithBatchLength(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.batchLength = n })
}

// WithBatchBytes sets the most bytes (payloads, headers and 48-byte frame
// headers) in one batch; a single larger message goes alone. Default 4 MiB.
func WithBatchBytes(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.batchBytes = n })
}

// WithLinger sets how long a message may wait for its batch to fill.
// Default 5ms; 0 sends as soon as the previous batch is done.
func WithLinger(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.linger = d })
}

// WithMaxBuffered bounds the messages and bytes held (buffered or in
// flight); Send blocks until there is room. A single Send larger than the
// bounds is let in when the buffer is empty. Default 100,000 messages and
// 64 MiB.
func WithMaxBuffered(messages, bytes int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.maxMessages, c.maxBytes = messages, bytes })
}

// WithPartitioning sets where batches go. Default Balanced (round robin per
// batch, resolved on the client). ByKey(k) sends everything to the key's
// partition.
func WithPartitioning(p Partitioning) ProducerOption {
	return producerOption(func(c *producerConfig) { c.partitioning = p })
}

// WithMessageKey routes each message by its own key: XXH32(key) %
// partitions, as ByKey does for a whole send. A nil or empty key falls
// back to the producer's partitioning. Messages with one key keep their
// order. Default: none.
func WithMessageKey(key func(m *Message) []byte) ProducerOption {
	return producerOption(func(c *producerConfig) { c.key = key })
}

// WithSendRetries sets how many times a batch that failed with a
// retriable error (IsRetriable) is sent again, with backoff from 100ms to
// 2s. Default 5. A retry after a connection failure may duplicate the
// batch.
func WithSendRetries(n int) ProducerOption {
	return producerOption(func(c *producerConfig) { c.retries = n })
}

// WithSendTimeout bounds one attempt to send a batch, including a wait for
// a reconnect. Default: the client's request timeout.
func WithSendTimeout(d time.Duration) ProducerOption {
	return producerOption(func(c *producerConfig) { c.sendTimeout = d })
}
