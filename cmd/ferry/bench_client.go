package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/ferryhq/ferry/broker"
	"github.com/ferryhq/ferry/iggy/iggybench"
	"github.com/spf13/cobra"
)

func newBenchClientCmd() *cobra.Command {
	var (
		o       iggybench.Options
		mode    string
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "client",
		Short: "Send batches to an Iggy server with Ferry's client, poll them back, and report both speeds",
		Long: `Create a stream of a random name with one topic of --partitions partitions
on the Iggy server at --address, send --messages messages of --size bytes
in batches of --batch from --producers connections (each batch to the next
partition), poll them all back from --consumers connections, and delete the
stream. Polling is by partition from offset 0 (--poll partition: no offsets
stored) or through a consumer group committing each batch (--poll group).

It prints messages/s, MB/s (payload bytes) and the CPU microseconds per
message of this process (user + system, from getrusage) for each
direction. Without --address an embedded broker is started in this process
on a temporary directory, on disk: its CPU is then counted too, as the
output says. Point --address at any Iggy server (Ferry's or upstream's) to
compare servers, or run another client against the same server to compare
clients.`,
		Example: "  ferry bench client\n  ferry bench client --address 127.0.0.1:8090 --size 1024\n  ferry bench client --partitions 4 --producers 4 --consumers 4 --poll group",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			embedded := o.Address == ""
			if embedded {
				o.Address = "embedded" // checked below, replaced by the broker's
			}
			if err := o.Check(); err != nil {
				return usageError{err}
			}
			if mode != "both" && mode != "send" {
				return usageError{fmt.Errorf("--mode is %q, want both or send", mode)}
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			where := o.Address
			if embedded {
				dir, err := os.MkdirTemp("", "ferry-bench-client-")
				if err != nil {
					return fmt.Errorf("temporary directory: %w", err)
				}
				defer os.RemoveAll(dir)
				b, err := broker.Start(ctx, broker.Config{Addr: "127.0.0.1:0", DataDir: dir,
					RootUsername: o.Username, RootPassword: o.Password})
				if err != nil {
					return fmt.Errorf("embedded broker: %w", err)
				}
				defer b.Close()
				o.Address, where = b.Addr(), "an embedded broker in this process (on disk; its CPU is counted below)"
			}
			fmt.Fprintf(out, "client: %d messages of %d bytes, batches of %d, %d partitions, %d producers, %d consumers (poll by %s), against %s\n",
				o.Messages, o.Size, o.Batch, o.Partitions, o.Producers, o.Consumers, o.Poll, where)
			send, poll, err := iggybench.Run(ctx, o)
			if send.Elapsed > 0 {
				printPhase(cmd, "send", send)
			}
			if err == nil && mode == "both" {
				printPhase(cmd, "poll", poll)
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.Address, "address", "", "the Iggy server (host:port); empty starts an embedded broker in this process")
	f.StringVar(&o.Username, "username", "iggy", "user to log in as")
	f.StringVar(&o.Password, "password", "iggy", "password")
	f.IntVar(&o.Size, "size", 100, "payload bytes per message")
	f.IntVar(&o.Batch, "batch", 1000, "messages per send and per poll")
	f.IntVar(&o.Messages, "messages", 1_000_000, "messages sent and polled back")
	f.IntVar(&o.Partitions, "partitions", 1, "partitions of the topic")
	f.IntVar(&o.Producers, "producers", 1, "sending connections")
	f.IntVar(&o.Consumers, "consumers", 1, "polling connections")
	f.BoolVar(&o.Prefetch, "prefetch", false, "with --poll group, read the next batch while the current one is committed (iggy.WithPrefetch)")
	f.StringVar(&o.Poll, "poll", iggybench.PollPartition, "how to poll: partition (from offset 0, no offsets stored) or group (a consumer group, each batch committed)")
	f.StringVar(&mode, "mode", "both", "both, or send only (the messages are still polled back to check them, but not reported)")
	f.DurationVar(&timeout, "timeout", 10*time.Minute, "give up after this long")
	return cmd
}

func printPhase(cmd *cobra.Command, name string, p iggybench.Phase) {
	fmt.Fprintf(cmd.OutOrStdout(), "%-5s  %9.0f messages/s  %7.1f MB/s  %6.2f CPU-µs/msg  (%d messages in %s)\n",
		name, p.MessagesPerSecond(), p.MBPerSecond(), p.CPUMicrosPerMessage(), p.Messages, p.Elapsed.Round(time.Millisecond))
}
