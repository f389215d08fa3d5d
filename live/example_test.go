package live_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

// exampleServer starts an in-memory embedded broker with a stream "shop"
// and a topic "orders" of the given partitions; a real program connects
// to its Iggy server, where someone created them.
func exampleServer(partitions uint32) (*broker.Broker, *live.Handle) {
	ctx := context.Background()
	b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	h, err := live.Connect(ctx, "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	admin := h.ProducerClient()
	if _, err := admin.CreateStream(ctx, "shop"); err != nil {
		log.Fatal(err)
	}
	if _, err := admin.CreateTopic(ctx, iggy.NamedID("shop"), "orders", partitions); err != nil {
		log.Fatal(err)
	}
	return b, h
}

func ExampleConnect() {
	b, err := broker.Start(context.Background(), broker.Config{Addr: "127.0.0.1:0"})
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()
	h, err := live.Connect(context.Background(), "iggy://iggy:iggy@"+b.Addr())
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	fmt.Println(h.ID() == b.Addr()) // the address, without the credentials
	// Output: true
}

func ExampleHandle_Stream() {
	b, h := exampleServer(1)
	defer b.Close()
	defer h.Close()
	ctx := context.Background()
	shop, orders := iggy.NamedID("shop"), iggy.NamedID("orders")
	_, err := h.ProducerClient().SendMessages(ctx, shop, orders, iggy.ToPartition(0),
		[]iggy.Message{{Payload: []byte("order 1")}, {Payload: []byte("order 2")}})
	if err != nil {
		log.Fatal(err)
	}

	s, err := h.Stream(ctx, shop, orders, "billing")
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close(ctx)
	for m, err := range s.Messages(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(m.Partition, m.Offset, m.PayloadString())
		m.Done() // billed: the group's offset may move past it now
		select {
		case <-s.Ready():
			fmt.Println("caught up")
			return
		default:
		}
	}
	// Output:
	// 0 0 order 1
	// 0 1 order 2
	// caught up
}

func ExampleHandle_Target() {
	b, h := exampleServer(1)
	defer b.Close()
	defer h.Close()
	ctx := context.Background()
	shop, orders := iggy.NamedID("shop"), iggy.NamedID("orders")

	tombstone := func(k live.Key) ([]byte, error) { return []byte(`{"deleted":true}`), nil }
	store := live.NewMemoryStore() // live.WithStateFile(path) in a real program
	t, err := h.Target(ctx, shop, orders, live.WithStore(store), live.WithDeletionValue(tombstone))
	if err != nil {
		log.Fatal(err)
	}
	// Round 1: three orders.
	t.Declare("o1", []byte(`{"status":"new"}`))
	t.Declare("o2", []byte(`{"status":"new"}`))
	t.Declare("o3", []byte(`{"status":"new"}`))
	a, err := t.Apply(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", a)
	// Round 2: o1 shipped, o2 unchanged, o3 gone.
	t.Declare("o1", []byte(`{"status":"shipped"}`))
	t.Declare("o2", []byte(`{"status":"new"}`))
	if a, err = t.Apply(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%+v\n", a)
	t.Close(ctx)

	// The other side: the topic as a map.
	m, err := h.Map(ctx, shop, orders, live.StringKey, live.WithDeletion(live.IsDeleted))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	for ev, err := range m.Events(ctx) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev.Kind, ev.Key, ev.Message.PayloadString())
		if ev.Key == "o1" {
			break
		}
	}
	// Output:
	// {Upserts:3 Deletes:0 Unchanged:0}
	// {Upserts:1 Deletes:1 Unchanged:1}
	// upsert o2 {"status":"new"}
	// upsert o1 {"status":"shipped"}
}

func ExampleHandle_Map() {
	b, h := exampleServer(1)
	defer b.Close()
	defer h.Close()
	ctx := context.Background()
	shop, orders := iggy.NamedID("shop"), iggy.NamedID("orders")
	// Messages keyed by their "key" header; the last one deletes "a".
	for _, kv := range [][3]string{{"a", "1", ""}, {"b", "1", ""}, {"a", "2", ""}, {"a", "-", "deleted"}} {
		hs := []iggy.Entry{iggy.Header(live.KeyHeader, iggy.StringValue(kv[0]))}
		if kv[2] != "" {
			hs = append(hs, iggy.Header(live.DeletedHeader, iggy.BoolValue(true)))
		}
		msg := iggy.Message{Payload: []byte(kv[1]), Headers: hs}
		if _, err := h.ProducerClient().SendMessages(ctx, shop, orders, iggy.ToPartition(0), []iggy.Message{msg}); err != nil {
			log.Fatal(err)
		}
	}

	m, err := h.Map(ctx, shop, orders, live.StringKey, live.WithDeletion(live.IsDeleted))
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close(ctx)
	ev, err := m.Next(ctx) // the catch-up: b alone, a was deleted
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ev.Kind, ev.Key, ev.Message.PayloadString(), ev.CatchUp)
	<-m.Ready()
	fmt.Println("keys:", m.Len())
	// Output:
	// upsert b 1 true
	// keys: 1
}
