package file

import (
	"errors"
	"path/filepath"
	"time"

	"github.com/ferryhq/ferry/connector"
)

// Formats of the source and the sink.
const (
	FormatNDJSON    = "ndjson"
	FormatLines     = "lines"
	FormatWholeFile = "whole_file" // source only
	FormatRaw       = "raw"        // sink only
)

// What the source does with a line that is not valid JSON (ndjson), a
// line longer than max_message_bytes or a whole file larger than it
// (on_invalid).
const (
	OnInvalidSkip = "skip" // skip it, with a warning naming the file and offset (default)
	OnInvalidStop = "stop" // stop before it: Poll fails until it is fixed
	OnInvalidRaw  = "raw"  // send an invalid JSON line as it is, marked; skip what is too long
)

// SourceSpec is the file source's plugin_config (see the package doc).
var SourceSpec = connector.NewSpec(
	connector.NewListField("paths", connector.NewStringField("").WithCheck(checkGlob)).Require().AtLeast(1).
		WithExample([]string{"logs/*.ndjson"}).WithDoc("files or globs to read (relative to the runtime's directory)"),
	connector.NewEnumField("format", FormatNDJSON, FormatLines, FormatWholeFile).WithDefault(FormatNDJSON).
		WithDoc("ndjson: one JSON message per line; lines: one text message per line; whole_file: one message per file"),
	connector.NewEnumField("schema", string(connector.SchemaJSON), string(connector.SchemaText), string(connector.SchemaRaw)).
		WithDoc("the messages' schema; default json for ndjson, text for lines, raw for whole_file"),
	connector.NewBoolField("follow").WithDefault(false).
		WithDoc("keep reading files as they grow and new files as they appear"),
	connector.NewDurationField("poll_interval").WithDefault(250*time.Millisecond).WithCheck(positive).
		WithDoc("pause between looks for new data when following"),
	connector.NewEnumField("start_at", "beginning", "end").WithDefault("beginning").
		WithDoc("where a first run starts in files that already exist"),
	connector.NewIntField("batch_size").AtLeast(1).WithDefault(1000).
		WithDoc("most messages per batch"),
	connector.NewSizeField("max_batch_bytes").Between(1, 1<<30).WithDefault(int64(1<<20)).
		WithDoc("most payload bytes per batch (a batch of big records stays this size in memory at each stage it passes)"),
	connector.NewSizeField("max_message_bytes").Between(1, 64_000_000).WithDefault(int64(10<<20)).
		WithDoc("longest line or file sent (Iggy's payload limit is 64MB); longer ones follow on_invalid"),
	connector.NewStringField("path_header").WithExample("file").
		WithDoc("a header carrying each message's file path; empty = none"),
	connector.NewEnumField("on_invalid", OnInvalidSkip, OnInvalidStop, OnInvalidRaw).WithDefault(OnInvalidSkip).
		WithDoc("what happens to an invalid JSON line or an oversized message: skip (with a warning), stop, or raw (send it marked)"),
)

// SinkSpec is the file sink's plugin_config (see the package doc).
var SinkSpec = connector.NewSpec(
	connector.NewStringField("path").Require().WithExample("out/{stream}/{topic}-{date}.ndjson").
		WithDoc("the file template: {key}, {stream}, {topic}, {partition}, {date}, {hour}"),
	connector.NewEnumField("format", FormatNDJSON, FormatLines, FormatRaw).WithDefault(FormatNDJSON).
		WithDoc("ndjson: one JSON record per line; lines: the payload and a newline; raw: payloads as they are"),
	connector.NewSizeField("rotate_size").AtLeast(0).WithDefault(int64(0)).
		WithDoc("start a new file when one would grow beyond this; 0 = never"),
	connector.NewDurationField("rotate_interval").WithDefault(time.Duration(0)).
		WithDoc("start a new file after this long; 0 = never"),
	connector.NewIntField("max_open_files").AtLeast(1).WithDefault(64).
		WithDoc("files kept open at once; the least recently written is closed first"),
)

func checkGlob(v any) error {
	if _, err := filepath.Match(v.(string), ""); err != nil || v == "" {
		return errors.New("expected a path or a glob such as \"logs/*.ndjson\"")
	}
	return nil
}

func positive(v any) error {
	if v.(time.Duration) <= 0 {
		return errors.New("expected a duration above zero, such as \"250ms\"")
	}
	return nil
}
