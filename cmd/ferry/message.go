package main

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ferryhq/ferry/iggy"
	"github.com/ferryhq/ferry/iggy/header"
	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

func newMessageCmd() *cobra.Command {
	c := &conn{}
	cmd := &cobra.Command{Use: "message", Short: "Send and poll messages"}
	c.flags(cmd)
	cmd.AddCommand(newSendCmd(c), newPollCmd(c))
	return cmd
}

func newSendCmd(c *conn) *cobra.Command {
	var partition int64
	var key, keyHex string
	var deleted bool
	cmd := &cobra.Command{
		Use:   "send STREAM TOPIC [MESSAGE...]",
		Short: "Send messages; with no MESSAGE, each line of standard input is one",
		Long: `Send messages. With --key (a string) or --key-hex (a binary key), every
message carries the key in its "key" header, Ferry's key convention (see
docs/keys.md), and goes to the key's partition. --deleted sends one
deletion marker for the key: the header deleted = true and the payload
MESSAGE, or "null" when none is given (Iggy refuses an empty payload).`,
		Example: `  ferry message send orders created '{"id":1}' '{"id":2}'
  ferry message send orders created --key customer-7 'hello'
  ferry message send orders created --key customer-7 --deleted
  cat events.ndjson | ferry message send orders created`,
		Args: cobra.MinimumNArgs(2),
	}
	cmd.Flags().Int64Var(&partition, "partition", -1, "send to this partition")
	cmd.Flags().StringVar(&key, "key", "", `the messages' key: set as their "key" header, it picks the partition`)
	cmd.Flags().StringVar(&keyHex, "key-hex", "", "a binary key, in hex (as --key)")
	cmd.Flags().BoolVar(&deleted, "deleted", false, "send a deletion marker (tombstone) for --key")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		k, err := sendKey(key, keyHex, partition, deleted)
		if err != nil {
			return usageError{err}
		}
		p := iggy.Balanced()
		switch {
		case partition >= 0:
			p = iggy.ToPartition(uint32(partition))
		case k.Data != nil:
			p = iggy.ByKey(k.Data)
		}
		payloads := args[2:]
		switch {
		case deleted && len(payloads) > 1:
			return usageError{errors.New("--deleted sends one deletion marker: give at most one MESSAGE")}
		case deleted && len(payloads) == 0:
			payloads = []string{iggy.DeletedPayload}
		case len(payloads) == 0:
			if payloads, err = readLines(cmd.InOrStdin()); err != nil {
				return err
			}
			if len(payloads) == 0 {
				return usageError{errors.New("no messages: give them as arguments or on standard input")}
			}
		}
		return c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			msgs := make([]iggy.Message, len(payloads))
			for i, s := range payloads {
				msgs[i] = iggy.Message{Payload: []byte(s), Headers: keyHeaders(k, deleted)}
			}
			conf, err := cl.SendMessages(ctx, iggy.ParseID(args[0]), iggy.ParseID(args[1]), p, msgs)
			if err != nil {
				return explainMissing(ctx, cl, args[0], args[1], partition, err)
			}
			if c.json {
				return printJSON(out, map[string]any{"sent": len(msgs), "partition": conf.Partition, "base_offset": conf.BaseOffset})
			}
			_, err = fmt.Fprintf(out, "sent %d message(s) to %s/%s partition %d from offset %d\n",
				len(msgs), args[0], args[1], conf.Partition, conf.BaseOffset)
			return err
		})(cmd, args)
	}
	return cmd
}

// sendKey checks send's key flags and returns the key header value: a
// string for --key, raw bytes for --key-hex, the zero Value for none.
func sendKey(key, keyHex string, partition int64, deleted bool) (header.Value, error) {
	var v header.Value
	switch {
	case key != "" && keyHex != "":
		return v, errors.New("give --key or --key-hex, not both")
	case key != "":
		v = header.StringValue(key)
	case keyHex != "":
		b, err := hex.DecodeString(keyHex)
		if err != nil || len(b) == 0 {
			return v, fmt.Errorf("--key-hex %q is not hex digits (two per byte)", keyHex)
		}
		v = header.RawValue(b)
	}
	switch {
	case partition >= 0 && v.Data != nil:
		return v, errors.New("--partition and --key cannot be used together")
	case len(v.Data) > 255:
		return v, fmt.Errorf("the key is %d bytes, at most 255", len(v.Data))
	case deleted && v.Data == nil:
		return v, errors.New("--deleted needs the key it deletes: give --key or --key-hex")
	}
	return v, nil
}

// keyHeaders are the headers of a message sent with key k (none for the
// zero Value), a deletion marker when deleted.
func keyHeaders(k header.Value, deleted bool) []header.Header {
	if k.Data == nil {
		return nil
	}
	hs := []header.Header{header.New(iggy.KeyHeader, k)}
	if deleted {
		hs = append(hs, header.New(iggy.DeletedHeader, header.BoolValue(true)))
	}
	return hs
}

func readLines(r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 10<<20)
	for sc.Scan() {
		if line := sc.Text(); line != "" {
			out = append(out, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read standard input: %w", err)
	}
	return out, nil
}

func newPollCmd(c *conn) *cobra.Command {
	var (
		offset             int64
		first, last, next  bool
		count              uint32
		consumer           string
		commit, showHeader bool
	)
	cmd := &cobra.Command{
		Use:   "poll STREAM TOPIC PARTITION",
		Short: "Poll messages from a partition",
		Long: `Poll messages from a partition and print each one's offset, id, timestamp
and payload (as text when it is valid UTF-8, else as hex). Start with
--offset N, --first (the default), --last or --next (after the consumer's
stored offset; with --commit the offset of the last message is stored).`,
		Example: "  ferry message poll orders created 0 --first --count 10",
		Args:    cobra.ExactArgs(3),
	}
	f := cmd.Flags()
	f.Int64Var(&offset, "offset", -1, "start at this offset")
	f.BoolVar(&first, "first", false, "start at the first message")
	f.BoolVar(&last, "last", false, "poll the last --count messages")
	f.BoolVar(&next, "next", false, "start after the consumer's stored offset")
	f.Uint32VarP(&count, "count", "n", 10, "messages to poll")
	f.StringVar(&consumer, "consumer", "1", "consumer id or name (for --next and --commit)")
	f.BoolVar(&commit, "commit", false, "store the offset of the last message polled")
	f.BoolVar(&showHeader, "headers", false, "print user headers")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		partition, err := strconv.ParseUint(args[2], 10, 32)
		if err != nil {
			return usageError{fmt.Errorf("PARTITION %q is not a number", args[2])}
		}
		chosen := 0
		strategy := iggy.First()
		for _, s := range []struct {
			on bool
			st iggy.PollingStrategy
		}{{offset >= 0, iggy.AtOffset(uint64(offset))}, {first, iggy.First()}, {last, iggy.Last()}, {next, iggy.Next()}} {
			if s.on {
				chosen++
				strategy = s.st
			}
		}
		if chosen > 1 {
			return usageError{errors.New("give only one of --offset, --first, --last, --next")}
		}
		return c.run(func(ctx context.Context, cl *iggy.Client, out io.Writer, _ []string) error {
			reply, err := cl.PollMessages(ctx, iggy.PollRequest{
				Consumer: iggy.SingleConsumer(iggy.ParseID(consumer)), Stream: iggy.ParseID(args[0]), Topic: iggy.ParseID(args[1]),
				Partition: iggy.Partition(uint32(partition)), Strategy: strategy, Count: count, AutoCommit: commit,
			})
			if err != nil {
				return explainMissing(ctx, cl, args[0], args[1], int64(partition), err)
			}
			return printMessages(out, c.json, showHeader, reply)
		})(cmd, args)
	}
	return cmd
}

func printMessages(out io.Writer, asJSON, headers bool, reply *iggy.PollReply) error {
	if asJSON {
		msgs := make([]map[string]any, 0, len(reply.Messages))
		for _, m := range reply.Messages {
			j := map[string]any{"offset": m.Offset, "id": idString(m.ID), "timestamp": timeUS(uint64(m.Timestamp.UnixMicro())),
				"origin_timestamp": timeUS(uint64(m.OriginTimestamp.UnixMicro()))}
			if utf8.Valid(m.Payload) {
				j["payload"] = string(m.Payload)
			} else {
				j["payload_hex"] = hex.EncodeToString(m.Payload)
			}
			if hs := headerStrings(&m); len(hs) > 0 {
				j["headers"] = hs
			}
			if k, ok := m.Key(); ok {
				j["key"] = keyString(k)
			}
			if isDeleted(&m) {
				j["deleted"] = true
			}
			msgs = append(msgs, j)
		}
		return printJSON(out, map[string]any{"partition": reply.PartitionID, "current_offset": reply.CurrentOffset, "messages": msgs})
	}
	w := bufio.NewWriter(out)
	for _, m := range reply.Messages {
		fmt.Fprintf(w, "offset %d  id %s  %s  ", m.Offset, idString(m.ID), timeUS(uint64(m.Timestamp.UnixMicro())))
		if k, ok := m.Key(); ok {
			fmt.Fprintf(w, "key %s  ", keyString(k))
		}
		if isDeleted(&m) {
			fmt.Fprint(w, "(deleted)  ")
		}
		if utf8.Valid(m.Payload) {
			fmt.Fprintf(w, "%s\n", m.Payload)
		} else {
			fmt.Fprintf(w, "0x%x\n", m.Payload)
		}
		if headers {
			for k, v := range headerStrings(&m) {
				fmt.Fprintf(w, "    %s: %s\n", k, v)
			}
		}
	}
	if len(reply.Messages) == 0 {
		fmt.Fprintf(w, "no messages (partition %d, current offset %d)\n", reply.PartitionID, reply.CurrentOffset)
	}
	return w.Flush()
}

// keyString prints a message key: a string key quoted when it is not
// plain text, a binary one as 0x and hex.
func keyString(k header.Value) string {
	if k.Kind == header.KindRaw {
		return fmt.Sprintf("0x%x", k.Data)
	}
	if s := string(k.Data); utf8.ValidString(s) && strconv.Quote(s) == `"`+s+`"` && !strings.ContainsRune(s, ' ') {
		return s
	}
	return strconv.Quote(string(k.Data))
}

// isDeleted reports whether m is a deletion marker: its DeletedHeader is
// the bool true.
func isDeleted(m *iggy.Message) bool {
	v, ok := header.Get(m.Headers, iggy.DeletedHeader)
	return ok && v.Bool()
}

func idString(id [16]byte) string { return uuid.UUID(id).String() }

func headerStrings(m *iggy.Message) map[string]string {
	if m.HeadersErr != nil {
		return map[string]string{"(unreadable)": "iggy: " + m.HeadersErr.Error()}
	}
	if len(m.Headers) == 0 {
		return nil
	}
	out := make(map[string]string, len(m.Headers))
	for _, e := range m.Headers {
		out[e.Key.String()] = e.Value.String()
	}
	return out
}
