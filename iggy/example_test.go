package iggy_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
)

// exampleBroker starts an in-memory embedded broker for an example; a
// real program dials its Iggy server instead.
func exampleBroker() *broker.Broker {
	b, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	return b
}

func ExampleDial() {
	b := exampleBroker()
	defer b.Close()
	ctx := context.Background()

	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	if _, err := c.CreateStream(ctx, "orders"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.NamedID("orders"), "created", 3, iggy.TopicMessageExpiry(24*time.Hour)); err != nil {
		log.Fatal(err)
	}
	_, err = c.GetTopic(ctx, iggy.NamedID("orders"), iggy.NamedID("shipped"))
	fmt.Println(errors.Is(err, iggy.ErrTopicNotFound))
	// Output: true
}

func ExampleClient_SendMessages() {
	b := exampleBroker()
	defer b.Close()
	ctx := context.Background()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	stream, topic := iggy.NamedID("s"), iggy.NamedID("t")
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, stream, "t", 1); err != nil {
		log.Fatal(err)
	}

	m := iggy.Message{Payload: []byte("hello"), Headers: []iggy.Entry{iggy.Header("source", iggy.StringValue("example"))}}
	if _, err := c.SendMessages(ctx, stream, topic, iggy.Balanced(), []iggy.Message{m}); err != nil {
		log.Fatal(err)
	}

	reply, err := c.PollMessages(ctx, iggy.PollRequest{
		Consumer: iggy.SingleConsumer(iggy.NamedID("reader")), Stream: stream, Topic: topic,
		Partition: iggy.Partition(0), Strategy: iggy.First(), Count: 10,
	})
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range reply.Messages {
		fmt.Println(m.Offset, string(m.Payload), m.Headers[0].Value)
	}
	// Output: 0 hello example
}

func ExampleProducer() {
	b := exampleBroker()
	defer b.Close()
	ctx := context.Background()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, iggy.NamedID("s"), "t", 2); err != nil {
		log.Fatal(err)
	}

	p, err := iggy.NewProducer(c, iggy.NamedID("s"), iggy.NamedID("t"),
		iggy.WithBatchLength(500), iggy.WithLinger(10*time.Millisecond))
	if err != nil {
		log.Fatal(err)
	}
	// A source hands over a group of records and acknowledges them
	// upstream only once the Ack says they are in Iggy.
	records := []iggy.Message{{Payload: []byte("a")}, {Payload: []byte("b")}, {Payload: []byte("c")}}
	ack := p.Send(ctx, records...)
	if err := ack.Wait(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println("sent", len(records))
	if err := p.Close(ctx); err != nil {
		log.Fatal(err)
	}
	// Output: sent 3
}

func ExampleGroupConsumer() {
	b := exampleBroker()
	defer b.Close()
	ctx := context.Background()
	c, err := iggy.Dial(ctx, "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	stream, topic := iggy.NamedID("s"), iggy.NamedID("t")
	if _, err := c.CreateStream(ctx, "s"); err != nil {
		log.Fatal(err)
	}
	if _, err := c.CreateTopic(ctx, stream, "t", 1); err != nil {
		log.Fatal(err)
	}
	msgs := []iggy.Message{{Payload: []byte("one")}, {Payload: []byte("two")}}
	if _, err := c.SendMessages(ctx, stream, topic, iggy.ToPartition(0), msgs); err != nil {
		log.Fatal(err)
	}

	g, err := iggy.NewGroupConsumer(c, stream, topic, iggy.NamedID("sink"), iggy.WithCreateGroup())
	if err != nil {
		log.Fatal(err)
	}
	defer g.Close(ctx)
	batch, err := g.Poll(ctx)
	if err != nil {
		log.Fatal(err)
	}
	for _, m := range batch.Messages {
		fmt.Println(string(m.Payload))
	}
	// The sink wrote them: only now is the offset stored.
	if err := batch.Commit(ctx); err != nil {
		log.Fatal(err)
	}
	// Output:
	// one
	// two
}
