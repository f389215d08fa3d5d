// Package file is the `file` source and the `file` sink: files on a local
// filesystem in and out of Iggy topics, with the delivery promises kept
// across crashes. Together they are also how whole-pipeline performance
// is measured (package filebench, `ferry bench pipeline`).
//
// # Source
//
//	paths = ["logs/*.ndjson", "/data/in.txt"] # required: paths or globs (filepath.Match syntax)
//	format = "ndjson"          # ndjson | lines | whole_file
//	schema = "json"            # default by format: json, text, raw
//	follow = false             # true: tail growing files and pick up new ones
//	poll_interval = "250ms"    # follow mode: how often globs and files are checked
//	start_at = "beginning"     # or "end": on the very first run, skip what files hold already
//	batch_size = 1000          # messages per batch
//	max_batch_bytes = "1MiB"   # payload bytes per batch
//	max_message_bytes = "10MiB" # longer lines (or larger whole files) are invalid, see on_invalid
//	path_header = ""           # a user header to carry each message's file path, e.g. "file_path"
//	on_invalid = "skip"        # skip | stop | raw: what to do with invalid input
//
// Formats: ndjson sends each line (spaces trimmed) as a JSON message; blank
// lines are passed over and a line that is not valid JSON is invalid.
// lines sends each non-empty line
// as it is (a "\r" before the "\n" is dropped; empty lines are passed
// over, as Iggy refuses empty payloads). whole_file sends each file as
// one message once it stops changing (its size and modification time are
// the same at two checks in a row), and again, whole, each time it changes
// later.
//
// Invalid input is a line that is not valid JSON (ndjson), a line longer
// than max_message_bytes, or a whole file larger than it. on_invalid says
// what happens to it:
//
//   - "skip" (the default): it is passed over, with a warning naming the
//     file, the offset, the reason and skipped_total, the number skipped
//     so far by this source.
//   - "stop": nothing after it is read. The lines before it are sent,
//     then Poll fails with an error naming the file and offset, so the
//     connector shows status Error and the runtime retries with backoff;
//     the saved state stays before the line, so once the file is fixed (or
//     on_invalid changed) reading goes on from there, skipping nothing.
//   - "raw": a line that is not valid JSON is sent as it is, with the user
//     header ferry.invalid = "json", in the JSON batch: a stream whose
//     schema is json, text or raw passes it through, while JSON transforms
//     or a conversion to Avro, Protobuf or FlatBuffers fail on it (use
//     skip or stop there). What is longer than max_message_bytes cannot
//     be sent and is skipped as with "skip".
//
// Every message carries the header ferry.source.position = "<path> at byte
// <offset>" while in the runtime: a message the runtime dead-letters (one
// a stream cannot take) keeps it, so the dead letter says where it came
// from; the runtime strips it from what it sends to the topics.
//
// Paths and globs are checked against the runtime's protected directories
// and [connectors] allowed_dirs (connector.Paths) when the source is
// built, and each matched file again before it is read: a file inside
// config_dir or the state directory is skipped with a warning.
//
// A line is sent only once its "\n" is there: a partial last line waits
// for the rest. A file that is read once (follow = false), or that no glob
// matches any more (renamed away by rotation, or deleted), is complete, so
// its unterminated last line is sent when its end is reached; then it is
// closed and forgotten. Without follow, the source ends (ErrEndOfInput)
// once every file found at the start is read.
//
// State: each file is known by its identity, its device and inode numbers
// (so a file renamed by rotation and still matched is not read twice), plus
// a fingerprint of its first bytes (up to 1 KiB read so far), and has the
// offset just past the last line sent. The state of all files goes with
// each batch; the runtime saves it after the batch is in Iggy and before
// acknowledging it, so after a crash or restart the source resumes at the
// last saved offsets: nothing is skipped and at most the batches in flight
// are sent again.
//
// Rotation and truncation: rotation by rename (app.log → app.log.1, new
// app.log) is followed: the old file is read to its end through its open
// descriptor, the new one is read from its start. A file that becomes
// shorter than the offset read (copytruncate, `> file`), or whose first
// bytes change, was truncated or rewritten: it is read again from its
// start, with a warning; lines written between the last read and the
// truncation are lost (that is copytruncate's race, not Ferry's). After a
// restart, a saved inode that now holds other first bytes is a new file,
// read from the start; a file renamed to a name no glob matches while Ferry
// was down is not read further.
//
// # Sink
//
//	path = "out/{stream}/{topic}/{partition}.ndjson" # required template
//	format = "ndjson"          # ndjson | lines | raw
//	rotate_size = "256MiB"     # 0 or absent: never
//	rotate_interval = "1h"     # 0 or absent: never
//	max_open_files = 64        # least recently used files beyond it are closed
//
// Placeholders: {stream}, {topic}, {partition}, {key} (the connector's
// key), {date} (YYYY-MM-DD) and {hour} (HH) of the message's broker
// timestamp in UTC, so a message delivered again lands in the same file.
// "/", "\" and NUL in names become "_", and "", "." and ".." become "_".
//
// Formats: ndjson writes each JSON payload on one line (compacted if it
// had line breaks) followed by "\n"; a payload that is not JSON is
// rejected. lines writes each payload and "\n"; a payload with a "\n" is
// rejected. raw writes payloads back to back, as they are. A rejected
// message fails permanently (the runtime dead-letters it with on_error =
// "dead_letter"); the others of the batch are written.
//
// Durability: Consume writes the batch, then flushes and fsyncs every file
// it wrote before it returns nil, so the offset the runtime commits after
// it is never ahead of the disk. A write error cuts the files back to
// their size before the batch, so the runtime's retry does not duplicate
// records. A crash can leave the tail of a batch half written; when the
// sink opens a file to append, it cuts it back to its last complete
// record: for ndjson and lines, just past its last "\n" (the sink owns the
// files its template names: a file there that does not end in "\n" loses
// its unterminated tail); for raw, which has no record boundary, to the
// size recorded in a hidden ".<name>.ferry-size" file beside it, written
// and fsynced after each batch. The removed tail belongs to a batch whose
// offset was not committed, so it is delivered again. Delivery is
// at-least-once: a crash after the fsync and before the offset commit
// writes that batch again.
//
// Rotation happens between batches only, before a batch writes its first
// record to a file: when that record would take the file past
// rotate_size, or when rotate_interval has passed since the sink opened
// or created the file. The file is fsynced and renamed to <name>.<UTC
// time YYYYMMDDTHHMMSSZ>.<ext> (a counter "_001", "_002"... is added when
// that name is taken, so names sort in rotation order), the directory is
// fsynced, and a new file takes the template's name. A batch is never
// split across files, so a file can pass rotate_size by up to one batch;
// in exchange a rotated file holds committed batches only, and a batch
// that fails is cut out of the one file it was written to, so its retry
// duplicates nothing. Rotated files are complete and never written again.
// Rotation by time happens when the next batch for the file arrives. When
// a failed batch cannot be cut back (the truncate fails), the file is
// closed without flushing and cut back to the batch's start when it is
// reopened.
//
// One Consume runs at a time per sink (a sink reading several topics
// writes one batch after the other).
package file
