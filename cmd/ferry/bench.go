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
	bench.AddCommand(newBenchPipelineCmd())
	return bench
}

func newBenchPipelineCmd() *cobra.Command {
	var (
		records, size, batch int
		dir                  string
		verbose              bool
	)
	cmd := &cobra.Command{
		Use:   "pipeline",
		Short: "Run file → add_fields → embedded broker → file and report throughput and CPU per message",
		Long: `Generate an NDJSON file of --records records of --size bytes in a temporary
directory, run the connector runtime with the embedded broker on it (the
file source, an add_fields transform, the file sink writing NDJSON, fsynced
before each offset commit), wait until the output holds every record, check
it, and print messages/s, MB/s (input bytes) and CPU microseconds per
message (user + system time of the whole process, from getrusage). The
timed window runs from the runtime's start to the last record on disk;
generating the input and checking the output are outside it.`,
		Example: "  ferry bench pipeline\n  ferry bench pipeline --records 100000 --size 1000",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if records < 1 {
				return usageError{fmt.Errorf("--records is %d, want at least 1", records)}
			}
			if size < 64 || size > 1<<20 {
				return usageError{fmt.Errorf("--size is %d, want 64 to 1048576 bytes", size)}
			}
			if batch < 1 {
				return usageError{fmt.Errorf("--batch is %d, want at least 1", batch)}
			}
			var log *slog.Logger
			if verbose {
				log = newLogger(os.Stderr, false, slog.LevelInfo)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "pipeline: file → add_fields → embedded broker → file, %d records of %d bytes\n", records, size)
			res, err := filebench.Run(cmd.Context(), filebench.Options{Records: records, Size: size, BatchLength: batch,
				Dir: dir, Logger: log})
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "records      %d (every one checked in the output)\n", res.Records)
			fmt.Fprintf(out, "elapsed      %s\n", res.Elapsed.Round(time.Millisecond))
			fmt.Fprintf(out, "messages/s   %.0f\n", res.MessagesPerSecond())
			fmt.Fprintf(out, "MB/s         %.1f (input %.1f MB)\n", res.MBPerSecond(), float64(res.InputBytes)/1e6)
			fmt.Fprintf(out, "CPU-µs/msg   %.2f (user+system %s)\n", res.CPUMicrosPerMessage(), res.CPU.Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().IntVar(&records, "records", 1_000_000, "how many records go through")
	cmd.Flags().IntVar(&size, "size", 200, "bytes per input record (without its newline)")
	cmd.Flags().IntVar(&batch, "batch", 1000, "source batch size and streams' batch_length")
	cmd.Flags().StringVar(&dir, "dir", "", "keep the input, output and state here instead of a temporary directory")
	cmd.Flags().BoolVar(&verbose, "verbose", false, "show the runtime's logs")
	return cmd
}
