// Package s3 is the `s3` sink (upstream's libiggy_connector_s3_sink) and
// the `s3` source (Ferry's; upstream has none), on
// github.com/minio/minio-go/v7, for AWS S3 and S3-compatible servers.
//
// # Sink
//
// The sink reads upstream's configuration unchanged:
//
//	bucket = "my-data-lake"           # required
//	region = "us-east-1"              # required
//	prefix = "iggy/raw"
//	endpoint = "http://localhost:9000" # MinIO, R2 ...; empty is AWS
//	access_key_id = "..."             # secrets; omit both for AWS_* variables,
//	secret_access_key = "..."         # ~/.aws/credentials or the instance profile
//	path_template = "{stream}/{topic}/{date}/{hour}"
//	file_rotation = "size"            # size | messages
//	max_file_size = "8MiB"
//	max_messages_per_file = 10000     # required with file_rotation = "messages"
//	output_format = "json_lines"      # json_lines (jsonl) | json_array (json) | raw
//	include_metadata = true           # offset, timestamp, stream, topic, partition_id
//	include_headers = false
//	max_retries = 3                   # attempts of an upload, as upstream counts
//	retry_delay = "1s"                # doubling, up to 60 s
//	path_style = true                 # default: on when endpoint is set
//	max_attempts = 3                  # Ferry: upstream's example file spells max_retries so
//	part_size = "16MiB"               # Ferry: multipart above this (at least 5 MiB)
//
// Keys are upstream's: prefix/template/FIRST-LAST.ext, FIRST and LAST the
// batch's offsets ("%06d"), {date} and {hour} from the first message's
// broker timestamp (UTC). Stream and topic names are escaped into one
// segment each (bytes other than letters, digits, '_', '-', '.' become
// %XX; "." and ".." are escaped whole); prefix and template are checked at
// load (no "." or ".." segments, no unknown placeholders). Nothing from a
// payload or a header reaches a key.
//
// Unlike upstream, which buffers across batches in memory (a crash loses
// the buffer, and a failed upload drops it), Consume uploads the batch
// before it returns, and the runtime commits the offset only after every
// upload of the batch was confirmed. A batch is one object, or several
// when it is larger than max_file_size or max_messages_per_file: rotation
// counts within a batch, from its first message, so objects are at most
// one batch (raise the stream's batch_length for larger objects).
// {timestamp}, upstream's "now", is the first message's broker time in
// milliseconds here, so that keys are deterministic.
//
// Delivery: a batch uploaded but not committed before a crash is read
// again from the same first offset with the same messages, so its objects
// get the same keys and are overwritten. If the batch is longer the
// second time (more messages had arrived), its last object gets a longer
// range; the first Consume of each partition after a start or a failure
// lists the objects starting at each object's first offset and deletes
// those ending within it, so each offset ends up in one object. A reader
// listing meanwhile may see both (records carry their offsets). Only a
// replay shorter than the first attempt (batch_length lowered across a
// crash) leaves an overlapping object, which is logged. An object is
// written whole or not at all (a multipart upload becomes visible when
// completed).
//
// S3 takes any bytes, so no message is ever refused on its own and the
// sink dead-letters nothing: every failure (a server down, 5xx, a missing
// bucket, refused keys) is Unavailable, the runtime keeps the batch and
// restarts the sink with backoff, and nothing is lost. Open fails with
// `bucket "x" (plugin_config.bucket) does not exist` for a missing bucket.
// Payloads the stream's codec cannot decode are dead-lettered by the
// runtime before the sink sees them.
//
// # Source
//
// The source reads the objects under a prefix in key order:
//
//	bucket, region, prefix, endpoint, access_key_id, secret_access_key, path_style  # as the sink's
//	format = "json_lines"     # json_lines (ndjson, jsonl) | lines (text) | whole (raw)
//	batch_size = 100          # most messages per batch; a batch never spans objects
//	poll_interval = "1s"      # listing again when everything was read
//	after_read = "none"       # none | delete | move
//	move_prefix = ""          # with move: objects move under it and are not read again
//	max_object_size = "10MiB" # with whole: a larger object is an error
//
// Its state is the last key and the byte offset within it, so a restart
// resumes mid-object with a ranged GET. Blank lines are skipped, "\r\n"
// is a line end, a last line without one is a line. Each message has an
// id derived from bucket, key and byte offset (stable across replays) and
// the headers s3_key (when at most 255 bytes) and s3_offset. New objects
// are found at the next listing, with keys after the last one read: an
// object whose key sorts before that is never read (name objects so that
// keys grow, as time-prefixed names do). The runtime saves a batch's
// state after the batch is in Iggy; after_read acts on Ack, once the
// object's last batch is saved, and again at Open if a crash came
// between. Delivery is at-least-once: a crash repeats at most the batch
// in flight, with the same ids.
//
// Tested against Versity's S3 gateway, versitygw v1.8.0, POSIX backend
// (internal/s3test): a stand-in for AWS S3 and MinIO, which were not run.
package s3
