// Command live shows package live end to end: rows of CSV files go
// through a keyed Target into a topic, and a keyed Map reads the topic
// back and prints it.
//
// Each CSV file is one round: its first column is the key, the row (as a
// JSON object of the header's fields) the value. Applying a round sends
// only the rows that changed since the last round and a deletion marker
// for every key the file no longer has.
//
//	go run ./examples/live                  # an embedded broker, the bundled files
//	go run ./examples/live -addr iggy://iggy:iggy@127.0.0.1:8090 a.csv b.csv
//
// With -addr the stream and topic are created when missing (by this
// program: package live never creates them) and the target's state is kept
// in -state, so running it again sends only what changed in between. With
// -follow it keeps printing the map's changes until interrupted.
package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/live"
)

//go:embed data/*.csv
var bundled embed.FS

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Stdout, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "live:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out io.Writer, args []string) error {
	fl := flag.NewFlagSet("live", flag.ContinueOnError)
	addr := fl.String("addr", "", `Iggy server, e.g. "iggy://iggy:iggy@127.0.0.1:8090" (default: start an embedded broker)`)
	streamName := fl.String("stream", "live-example", "stream (created if missing)")
	topicName := fl.String("topic", "products", "topic (created if missing, one partition)")
	statePath := fl.String("state", defaultStatePath(), "the target's state file (with -addr)")
	follow := fl.Bool("follow", false, "keep printing the map's changes until interrupted")
	if err := fl.Parse(args); err != nil {
		return err
	}

	if *addr == "" {
		b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", RootUsername: "iggy", RootPassword: "iggy"})
		if err != nil {
			return err
		}
		defer b.Close()
		*addr = "iggy://iggy:iggy@" + b.Addr()
		// The broker keeps nothing after this run, so neither may the state.
		dir, err := os.MkdirTemp("", "ferry-live-example-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		*statePath = filepath.Join(dir, "state.json")
		fmt.Fprintln(out, "using an embedded broker")
	}
	h, err := live.Connect(ctx, *addr)
	if err != nil {
		return err
	}
	defer h.Close()
	stream, topic := iggy.NamedID(*streamName), iggy.NamedID(*topicName)
	if err := ensureTopic(ctx, h.ProducerClient(), *streamName, *topicName); err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(*statePath), 0o700); err != nil {
		return fmt.Errorf("state file %s: %w", *statePath, err)
	}
	tombstone := func(live.Key) ([]byte, error) { return []byte(`{"deleted":true}`), nil }
	target, err := h.Target(ctx, stream, topic, live.WithStateFile(*statePath), live.WithDeletionValue(tombstone))
	if err != nil {
		return err
	}
	files, load := fl.Args(), os.ReadFile
	if len(files) == 0 {
		files, load = []string{"data/products-v1.csv", "data/products-v2.csv"}, bundled.ReadFile
	}
	for _, name := range files {
		b, err := load(name)
		if err != nil {
			return err
		}
		rows, err := readCSV(name, b)
		if err != nil {
			return err
		}
		for _, r := range rows {
			if err := target.Declare(r.key, r.value); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
		a, err := target.Apply(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "%s: sent %d changed rows and %d deletions (%d unchanged)\n",
			filepath.Base(name), a.Upserts, a.Deletes, a.Unchanged)
	}
	if err := target.Close(ctx); err != nil { // keep what was published
		return err
	}

	m, err := h.Map(ctx, stream, topic, live.StringKey, live.WithDeletion(live.IsDeleted))
	if err != nil {
		return err
	}
	defer m.Close(context.WithoutCancel(ctx))
	for !isClosed(m.Ready()) {
		if _, err := m.Next(ctx); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "%s/%s as a map (%d keys):\n", *streamName, *topicName, m.Len())
	for k, msg := range m.All() {
		fmt.Fprintf(out, "  %s  %s\n", k, msg.Payload)
	}
	if !*follow {
		return nil
	}
	fmt.Fprintln(out, "following changes; Ctrl-C to stop")
	for ev, err := range m.Events(ctx) {
		if errors.Is(err, context.Canceled) {
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "  %s %s %s\n", ev.Kind, ev.Key, ev.Message.Payload)
	}
	return nil
}

// ensureTopic creates the stream and a one-partition topic if missing.
func ensureTopic(ctx context.Context, c *iggy.Client, stream, topic string) error {
	if _, err := c.GetStream(ctx, iggy.NamedID(stream)); errors.Is(err, iggy.ErrStreamNotFound) {
		if _, err := c.CreateStream(ctx, stream); err != nil {
			return err
		}
	} else if err != nil {
		return err
	}
	if _, err := c.GetTopic(ctx, iggy.NamedID(stream), iggy.NamedID(topic)); errors.Is(err, iggy.ErrTopicNotFound) {
		_, err = c.CreateTopic(ctx, iggy.NamedID(stream), topic, 1)
		return err
	} else if err != nil {
		return err
	}
	return nil
}

type row struct {
	key   string
	value []byte
}

// readCSV reads a CSV file with a header row: the first column is the
// key, the value is the row as a JSON object keyed by the header.
func readCSV(name string, b []byte) ([]row, error) {
	records, err := csv.NewReader(bytes.NewReader(b)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(records) < 1 {
		return nil, fmt.Errorf("%s: no header row", name)
	}
	header := records[0]
	var rows []row
	for i, rec := range records[1:] {
		fields := map[string]string{}
		for j, v := range rec[1:] {
			fields[header[j+1]] = v
		}
		value, err := json.Marshal(fields)
		if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", name, i+2, err)
		}
		rows = append(rows, row{key: rec[0], value: value})
	}
	return rows, nil
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// defaultStatePath keeps the target's state out of the working directory
// (often a checkout): in the user's cache directory.
func defaultStatePath() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "ferry", "live-example-state.json")
}
