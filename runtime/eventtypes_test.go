package runtime

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ferryhq/ferry/codec"
	"github.com/ferryhq/ferry/config"
	"github.com/ferryhq/ferry/connector"
	"github.com/ferryhq/ferry/eventtypes"
	"github.com/ferryhq/ferry/iggy/header"
)

// eventDeployment is eventtypes' sample deployment (two sources, two
// sinks, a hook, JSON Schema, Avro and Protobuf types).
func eventDeployment(t *testing.T) (*config.Runtime, *config.ConnectorSet) {
	t.Helper()
	env := config.WithEnv(config.MapEnv(nil))
	rt, err := config.Load("../eventtypes/testdata/deploy/config.toml", env)
	require.NoError(t, err)
	store, err := config.OpenStore(rt.Connectors.ConfigDir, env)
	require.NoError(t, err)
	set, err := store.Load(context.Background())
	require.NoError(t, err)
	require.Empty(t, set.Errors)
	return rt, set
}

func TestEventCheckSource(t *testing.T) {
	t.Parallel()
	rt, set := eventDeployment(t)
	src := set.Get(config.KindSource, "orders")
	checks, err := newEventChecks(rt, src, nil)
	require.NoError(t, err)
	ch := checks.stream("shop", "orders", config.SchemaJSON, config.StreamSchema{}, nil)
	require.NotNil(t, ch)
	require.Nil(t, checks.stream("shop", "elsewhere", config.SchemaJSON, config.StreamSchema{}, nil), "not a stream of the connector")

	ok := `{"type":"order.created","order_id":"o-1","customer":{"id":"c-1"},"total":3}`
	require.NoError(t, ch.checkMessage(&connector.Message{Payload: []byte(ok)}))
	// The "type" member picks the type among the two the stream declares.
	err = ch.checkMessage(&connector.Message{Payload: []byte(`{"type":"order.created","order_id":"o-1","customer":{},"total":3}`)})
	require.ErrorIs(t, err, errInvalidEvent)
	var ve *eventtypes.ValidationError
	require.ErrorAs(t, err, &ve)
	require.Equal(t, "/customer", ve.Problems[0].Pointer)
	require.EqualError(t, err, `invalid event: event type "order.created": at /customer: missing property 'id'`)

	// The ce_type header wins over the payload.
	m := &connector.Message{Payload: []byte(ok)}
	m.SetHeader(HeaderEventType, header.StringValue("order.cancelled"))
	require.ErrorContains(t, ch.checkMessage(m), `event type "order.cancelled": at /type: value must be`)
	m.SetHeader(HeaderEventType, header.StringValue("order.shipped"))
	require.ErrorContains(t, ch.checkMessage(m), `"order.shipped" (its ce_type header), which the stream does not declare (it declares order.created, order.cancelled)`)
	m.SetHeader(HeaderEventType, header.Uint32Value(7))
	require.ErrorContains(t, ch.checkMessage(m), "the ce_type header is not a string")
	require.ErrorContains(t, ch.checkMessage(&connector.Message{Payload: []byte(`{"order_id":"o"}`)}), "names no event type")

	var nilCheck *eventCheck
	require.NoError(t, nilCheck.checkMessage(&connector.Message{Payload: []byte("anything")}), "a stream that declares nothing is not checked")
}

func TestEventCheckSink(t *testing.T) {
	t.Parallel()
	rt, set := eventDeployment(t)
	ledger := set.Get(config.KindSink, "ledger")
	checks, err := newEventChecks(rt, ledger, nil)
	require.NoError(t, err)
	pay := checks.stream("shop", "payments", config.SchemaJSON, config.StreamSchema{}, nil)
	require.NotNil(t, pay)
	require.ErrorIs(t, pay.checkMessage(withType("payment.settled")(&connector.Message{Payload: []byte(`{"type":"payment.settled","payment_id":"p"}`)})),
		errInvalidEvent, "the Avro type refuses members it does not declare")
	require.NoError(t, pay.checkMessage(withType("payment.settled")(&connector.Message{Payload: []byte(`{"payment_id":"p","amount_cents":5,"status":"SETTLED"}`)})))
	// Inventory events arrive on the topic the type's entry names (no
	// source of this deployment writes it): the sink is checked there.
	inv := checks.stream("shop", "inventory", config.SchemaJSON, config.StreamSchema{}, nil)
	require.NotNil(t, inv)
	require.NoError(t, inv.checkMessage(withType("inventory.adjusted")(&connector.Message{Payload: []byte(`{"sku":"a","delta":2}`)})))
	require.ErrorIs(t, inv.checkMessage(withType("inventory.adjusted")(&connector.Message{Payload: []byte(`{"sku":"a","delta":"two"}`)})), errInvalidEvent)

	hook := set.Get(config.KindSink, "hook-notify")
	hc, err := newEventChecks(rt, hook, nil)
	require.NoError(t, err)
	require.NoError(t, hc.stream("shop", "orders", config.SchemaJSON, config.StreamSchema{}, nil).
		checkMessage(&connector.Message{Payload: []byte(`{"type":"order.cancelled","order_id":"o"}`)}), "one declared type: no type member needed, and it validates")

	// A connector declaring nothing has no checks at all.
	none, err := newEventChecks(rt, &config.Connector{Type: config.KindSink, Key: "plain", Enabled: true,
		Consumers: []config.ConsumerStream{{Stream: "other", Topics: []string{"t"}}}}, nil)
	require.NoError(t, err)
	require.Nil(t, none)
	require.Nil(t, none.stream("other", "t", config.SchemaJSON, config.StreamSchema{}, nil))
}

// withType sets the ce_type header.
func withType(name string) func(*connector.Message) *connector.Message {
	return func(m *connector.Message) *connector.Message {
		m.SetHeader(HeaderEventType, header.StringValue(name))
		return m
	}
}

func TestEventCheckAvroStream(t *testing.T) {
	t.Parallel()
	rt, _ := eventDeployment(t)
	dir := t.TempDir()
	avsc, err := filepath.Abs("../eventtypes/testdata/deploy/schemas/payment.settled.avsc")
	require.NoError(t, err)
	file := filepath.Join(dir, "payments.toml")
	require.NoError(t, os.WriteFile(file, []byte(`type = "source"
key = "payments"
[[streams]]
stream = "shop"
topic = "payments"
schema = "avro"
avro_schema_path = "`+avsc+`"
produces = ["payment.settled"]
`), 0o644))
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	c, err := config.ParseConnector(file, data, config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	c.File = file
	s := c.Producers[0]
	sc, err := codec.New(connector.SchemaAvro, codec.Options{AvroSchemaPath: s.AvroSchemaPath})
	require.NoError(t, err)
	checks, err := newEventChecks(rt, c, nil)
	require.NoError(t, err)
	ch := checks.stream("shop", "payments", s.Schema, s.StreamSchema, sc)
	require.NotNil(t, ch)
	good := []byte{2, 'p', 0xc8, 0x01, 2} // "p", 100, REFUNDED
	require.NoError(t, ch.check(nil, good), "an Avro datum of the type's schema")
	require.ErrorIs(t, ch.check(nil, good[:3]), errInvalidEvent)
	require.ErrorContains(t, ch.check(nil, []byte{2, 'p', 0xc8, 0x01, 8}), "invalid event", "enum index out of range")
	// On the sink side the payload was decoded to JSON first.
	require.NoError(t, ch.decoded().check(nil, []byte(`{"payment_id":"p","amount_cents":100,"status":"REFUNDED"}`)))
	require.ErrorIs(t, ch.decoded().check(nil, []byte(`{"payment_id":"p"}`)), errInvalidEvent)
}

func TestEventChecksConfigErrors(t *testing.T) {
	t.Parallel()
	rt, _ := eventDeployment(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "pg.toml")
	src := "type = \"sink\"\nkey = \"pg\"\n[[streams]]\nstream = \"shop\"\ntopics = [\"orders\"]\nconsumes = [\"order.craeted\"]\n"
	require.NoError(t, os.WriteFile(file, []byte(src), 0o644))
	c, err := config.ParseConnector(file, []byte(src), config.WithEnv(config.MapEnv(nil)))
	require.NoError(t, err)
	c.File = file
	_, err = newEventChecks(rt, c, nil)
	require.ErrorContains(t, err, `pg.toml:6: streams[0].consumes[0]: unknown event type "order.craeted"; did you mean "order.created"?`)
	var errs config.Errors
	require.True(t, errors.As(err, &errs))
}
