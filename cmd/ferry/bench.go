package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/ferryhq/ferry/connectors/file/filebench"
	"github.com/spf13/cobra"
)

func newBenchCmd() *cobra.Command {
	bench := &cobra.Command{
		Use:   "bench",
		Short: "Measure Ferry's performance on this machine",
		Args:  cobra.NoArgs,
	}
	bench.AddCommand(newBenchPipelineCmd(), newBenchClientCmd())
	return bench
}

func newBenchPipelineCmd() *cobra.Command {
	var (
		records, size, batch, sinks, partitions int
		transforms, dir                         string
		verbose                                 bool
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run file → transforms → embedded broker → file and report throughput, CPU per message and peak memory",
		Long: `Generate an NDJSON file of --records records of --size bytes in a temporary
directory, run the connector runtime with the embedded broker on it (the
file source with the --transforms chain, a topic of --partitions
partitions, --sinks file sinks each writing NDJSON, fsynced before each
offset commit), wait until every sink's output holds every record, check
each line against the expected transformed record, and print messages/s,
MB/s (input bytes), CPU microseconds per message (user + system time of the
whole process, from getrusage) and the process's peak resident memory.

--transforms is "fields" (add two fields, delete one, update one when
present: add_fields, delete_fields, update_fields), "add" (one add_fields)
or "none". The timed window runs from the runtime's start to the last
record on disk; generating the input and checking the output are outside
it.`,
		Example: "  ferry bench pipeline\n  ferry bench pipeline --records 100000 --size 10240\n  ferry bench pipeline --sinks 3 --partitions 4",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := filebench.Options{Records: records, Size: size, BatchLength: batch, Dir: dir,
				Transforms: filebench.Chain(transforms), Sinks: sinks, Partitions: partitions}
			if err := o.Check(); err != nil {
				return usageError{err}
			}
			if verbose {
				o.Logger = newLogger(os.Stderr, false, slog.LevelInfo)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pipeline: file → %s → embedded broker (%d partitions) → %d file sinks, %d records of %d bytes\n",
				o.Transforms, o.Partitions, o.Sinks, o.Records, o.Size)
			res, err := filebench.Run(cmd.Context(), o)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "records      %d (every one checked in every sink's output)\n", res.Records)
			fmt.Fprintf(out, "elapsed      %s\n", res.Elapsed.Round(time.Millisecond))
			fmt.Fprintf(out, "messages/s   %.0f\n", res.MessagesPerSecond())
			fmt.Fprintf(out, "MB/s         %.1f (input %.1f MB)\n", res.MBPerSecond(), float64(res.InputBytes)/1e6)
			fmt.Fprintf(out, "CPU-µs/msg   %.2f (user+system %s)\n", res.CPUMicrosPerMessage(), res.CPU.Round(time.Millisecond))
			if res.PeakRSS > 0 {
				fmt.Fprintf(out, "peak RSS     %.1f MiB (anonymous, the heap and stacks: %.1f MiB at most; the rest is the binary's own pages)\n",
					float64(res.PeakRSS)/(1<<20), float64(res.PeakAnon)/(1<<20))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&records, "records", 1_000_000, "how many records go through")
	cmd.Flags().IntVar(&size, "size", 200, "bytes per input record (without its newline)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "source batch size and streams' batch_length")
	cmd.Flags().StringVar(&transforms, "transforms", string(filebench.Fields), "the source's transforms: fields, add or none")
	cmd.Flags().IntVar(&sinks, "sinks", 1, "how many file sinks read the topic (each its own consumer group)")
	cmd.Flags().IntVar(&partitions, "partitions", 1, "the topic's partitions")
	cmd.Flags().StringVar(&dir, "dir", "", "keep the input, output and state here instead of a temporary directory")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "show the runtime's logs")
	return cmd
}
