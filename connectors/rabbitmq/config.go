package rabbitmq

import (
	"fmt"
	"math"
	"net/url"
	"time"

	"github.com/ferryhq/ferry/connector"
)

var exchangeTypes = []string{"direct", "topic", "fanout", "headers"}

func amqpURLField() connector.Field {
	return connector.NewStringField("amqp_url").AsSecret().WithDefault("amqp://guest:guest@localhost:5672").
		WithCheck(checkURL).WithDoc("the server, amqp:// or amqps://, with its credentials (a secret)")
}

// SinkSpec is the sink's plugin_config: upstream's keys
// (libiggy_connector_rabbitmq_sink), then Ferry's.
var SinkSpec = connector.NewSpec(
	amqpURLField(),
	connector.NewStringField("exchange").WithDefault("iggy_events").WithDoc(`the exchange published to ("" is the default exchange)`),
	connector.NewEnumField("exchange_type", exchangeTypes...).WithDefault("topic").WithDoc("the exchange's type when it is declared"),
	connector.NewStringField("routing_key").WithDefault("iggy.messages").WithDoc("the routing key of every message"),
	connector.NewBoolField("durable_exchange").WithDefault(true).WithDoc("declare the exchange durable (must match an existing one)"),
	connector.NewEnumField("delivery_mode", "persistent", "non_persistent").WithDefault("persistent").
		WithDoc("persistent messages survive a RabbitMQ restart in durable queues"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add iggy_stream, iggy_topic, iggy_partition_id and iggy_offset headers"),
	connector.NewBoolField("verbose_logging").WithDefault(false).WithDoc("log each batch at info instead of debug"),
	connector.NewIntField("max_retries").Between(0, math.MaxUint32).WithDefault(3).WithDoc("publish retries inside one batch"),
	connector.NewIntField("retry_delay_secs").AtLeast(0).WithDefault(1).WithDoc("first wait between retries, in seconds"),
	connector.NewIntField("max_retry_delay_secs").AtLeast(0).WithDefault(5).WithDoc("longest wait between retries, in seconds"),
	connector.NewIntField("timeout_secs").AtLeast(1).WithDefault(30).WithDoc("connect, publish and confirm timeout, in seconds"),
	connector.NewBoolField("mandatory").WithDefault(false).WithDoc("a message no queue takes is returned: a permanent error"),
	connector.NewBoolField("declare_exchange").WithDefault(true).
		WithDoc(`Ferry: declare the exchange at start; false publishes to one that must exist`),
	connector.NewSizeField("max_message_size").AtLeast(1).WithDefault(int64(128<<20)).
		WithDoc("Ferry: the server's max_message_size (RabbitMQ's default 128 MiB); a larger message is refused before it is sent"),
)

// SourceSpec is the source's plugin_config (Ferry's; upstream has no
// RabbitMQ source). Names follow the sink's.
var SourceSpec = connector.NewSpec(
	amqpURLField(),
	connector.NewStringField("queue").Require().WithExample("orders").WithDoc("the queue consumed"),
	connector.NewBoolField("declare_queue").WithDefault(true).WithDoc("declare the queue at start"),
	connector.NewBoolField("durable_queue").WithDefault(true).WithDoc("declare it durable"),
	connector.NewStringField("exchange").WithDefault("").WithDoc("when set, bind the queue to this exchange (declared if missing)"),
	connector.NewEnumField("exchange_type", exchangeTypes...).WithDefault("topic").WithDoc("the exchange's type when it is declared"),
	connector.NewBoolField("durable_exchange").WithDefault(true).WithDoc("declare the exchange durable"),
	connector.NewStringField("routing_key").WithDefault("#").WithDoc("the binding key"),
	connector.NewIntField("batch_size").Between(1, 65535).WithDefault(100).WithDoc("most messages per batch"),
	connector.NewIntField("prefetch_count").Between(0, 65535).WithDefault(0).
		WithDoc("unacknowledged deliveries RabbitMQ sends ahead; 0 = 2 × batch_size"),
	connector.NewDurationField("batch_wait").WithDefault(100*time.Millisecond).
		WithDoc("after the first delivery, how long a batch waits for more"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDefault(string(connector.SchemaJSON)).WithDoc("the payloads' format in Iggy"),
	connector.NewBoolField("include_metadata").WithDefault(true).
		WithDoc("add rabbitmq_exchange, rabbitmq_routing_key and rabbitmq_message_id headers"),
	connector.NewIntField("timeout_secs").AtLeast(1).WithDefault(30).WithDoc("connect timeout, in seconds"),
).Lint(func(s *connector.Settings, fail connector.FailFunc) {
	if p := s.Int("prefetch_count"); p != 0 && p < s.Int("batch_size") {
		fail("prefetch_count", "%d is below batch_size %d: a batch could never fill", p, s.Int("batch_size"))
	}
})

func checkURL(v any) error {
	s, _ := v.(string)
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "amqp" && u.Scheme != "amqps") || u.Host == "" {
		return fmt.Errorf("expected an amqp:// or amqps:// URL with a host")
	}
	return nil
}

// safeURL is u without its credentials, for logs and errors.
func safeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	u.User = nil
	return u.Redacted()
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }
