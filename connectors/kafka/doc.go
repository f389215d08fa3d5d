// Package kafka is the `kafka` sink and source (Ferry's; upstream Iggy
// has no Kafka connector), on github.com/twmb/franz-go (kgo).
package kafka
