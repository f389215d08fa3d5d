// Package exec is the `exec` sink: it runs a shell command for each
// message, the engine behind `ferry hook`. It owns the command's
// placeholder rewriting, the running of one process group per message
// (timeout, output capture) and the ordering of runs; retries and the
// dead-letter path are the runtime's.
//
// plugin_config:
//
//	command = "cd /srv/app; php artisan execute:command {payload}"   # required
//	shell = "/bin/sh"        # run as: <shell> -c <command>; default /bin/sh
//	working_dir = "/srv/app" # default: the runtime's working directory
//	env = { APP_ENV = "production" }   # added to the runtime's environment
//	pass_env = ["IGGY_CONNECTORS_SINK_APP_*"] # withheld variables to pass anyway (see below)
//	timeout = "1m"           # per run; the whole process group is killed; "0s" or 0 = none; default 1m
//	concurrency = 1          # commands running at once in this sink; default 1
//	ordering = "partition"   # or "none"; default "partition"
//	output_limit = 4096      # bytes of stdout and of stderr kept for the log; default 4096
//
// # Placeholders are data, never shell text
//
// The command is a shell command line as a user types it. The
// placeholders {payload}, {offset}, {stream}, {topic}, {partition}, {id}
// and {timestamp} are never spliced into it. Instead, once, when the sink
// is built, each placeholder is rewritten into a quoted reference to an
// environment variable (FERRY_PAYLOAD, FERRY_OFFSET, FERRY_STREAM,
// FERRY_TOPIC, FERRY_PARTITION, FERRY_ID, FERRY_TIMESTAMP), and each run
// sets those variables. The shell text is the same for every message, so
// no payload can add commands: `; rm -rf /`, `$(...)`, backquotes,
// quotes and newlines in a payload arrive as those bytes, as one
// argument.
//
// The rewrite reads the command line the way a POSIX shell does, far
// enough to know the quoting around each placeholder:
//
//	where the placeholder is     becomes                      so that
//	unquoted: echo {payload}     echo "$FERRY_PAYLOAD"        one field, no splitting or globbing
//	"…{payload}…"                "…${FERRY_PAYLOAD}…"         part of the quoted string
//	'…{payload}…'                '…'"${FERRY_PAYLOAD}"'…'     the single quotes are closed around it
//	here-document body (<<EOF)   ${FERRY_PAYLOAD}             expanded, not split
//	$(( {offset} + 1 ))          $(( ${FERRY_OFFSET} + 1 ))   numeric placeholders only
//	inside $(…), at any depth    as above, by the quoting inside $(…)
//
// and leaves alone, or refuses:
//
//   - \{payload} (a backslash before the brace, outside single quotes) is
//     not a placeholder: the text stays as written.
//   - ${payload} is the shell's own variable "payload", not a placeholder.
//   - A placeholder in a comment stays as written.
//   - {name} with a name not listed above (JSON such as '{"a":1}', brace
//     groups, brace expansion) is ordinary text.
//   - Refused with an error naming the byte: a placeholder inside
//     backquotes `…` (use $(…)), inside ${…} (use the variable, as in
//     ${FERRY_PAYLOAD:-none}), inside $'…', inside a here-document whose
//     delimiter is quoted (its body is literal), and a non-numeric
//     placeholder inside $((…)), where the shell would evaluate the value
//     as an arithmetic expression. Unterminated quotes, $(, ${, $((,
//     backquotes and NUL bytes are errors too.
//
// The value is data unless the command itself hands it to something that
// runs it: eval "$FERRY_PAYLOAD", sh -c {payload}, a placeholder as the
// command name, bash's [[ {payload} -eq 1 ]]. Those are the command's
// choice and are not rewritten. The scanner does not understand the
// unbalanced ")" of case patterns inside $(…); avoid placeholders after
// one there.
//
// # Each run
//
// The command runs as `<shell> -c <rewritten command>` in its own process
// group, with the runtime's environment, then env, then the FERRY_*
// variables (env cannot set those). The runtime's environment holds its
// secrets, and the command does not get them: IGGY_CONNECTORS_* (the
// runtime's settings, connector credentials, the API key), IGGY_PASSWORD,
// IGGY_TOKEN, IGGY_ROOT_PASSWORD and FERRY_* (FERRY_API_KEY, ...) are
// withheld. pass_env passes some of them on purpose: each entry is a
// variable name, or a prefix ending in "*"; ["*"] passes the whole
// environment. Variables set in env always reach the command.
//
// The payload is also written to standard input. FERRY_OFFSET,
// FERRY_PARTITION and FERRY_TIMESTAMP (when the broker stored the
// message, in microseconds since the Unix epoch) are decimal numbers; FERRY_ID is the message id as a UUID. An
// environment variable cannot hold a NUL byte, and Linux limits one to
// 128 KiB: a payload with a NUL or longer than 128 KiB - 64 bytes leaves
// FERRY_PAYLOAD unset, and a command that uses {payload} fails for that
// message without running, marked connector.Permanent (when every failure
// of a batch is permanent, the runtime skips the retries); read standard
// input instead.
//
// Exit status 0 is success. A non-zero exit, death by a signal, a
// failure to start or the timeout (which kills the whole process group)
// fails that message: Consume returns a connector.MessageErrors naming
// it, and the runtime retries it with backoff up to max_retries, then
// applies the stream's on_error (dead_letter, or stop). The first
// output_limit bytes of stdout and of stderr go to the connector's log
// (with a note when cut): at Info level when the command printed
// anything (or verbose = true), at Warn level with the error when it
// failed. The error carries the start of stderr, so a dead-lettered
// message says why. Background processes the command leaves behind are
// not waited for beyond a second of holding its output open.
//
// # Ordering and concurrency
//
// Up to concurrency commands run at once in one sink. With ordering =
// "partition" (the default), the messages of one partition run one at a
// time in offset order, so concurrency helps only when the sink reads
// several topics or streams at once. A failed message does not hold back
// the rest of its batch: the runtime retries it after them, so for
// strict order across failures set batch_length = 1 on the stream (ferry
// hook does). With ordering = "none", the messages of a batch run in
// parallel, up to concurrency.
package exec
