// Package config loads the connector runtime's configuration: the
// runtime's config.toml and one file per connector, in the format of the
// Apache Iggy connector runtime, unchanged, plus Ferry's extensions. It
// owns the environment overrides, the .env file, the local and HTTP
// configuration providers, and the versions of connector configurations.
// It does not depend on the runtime; the runtime depends on it.
//
// # Runtime configuration
//
// [Load] reads, in order: the defaults ([Default]), the file (the --config
// flag value, else IGGY_CONNECTORS_CONFIG_PATH, else none), and the
// IGGY_CONNECTORS_* variables. The sections and keys are upstream's:
//
//	[iggy]            address, username, password, token
//	[iggy.tls]        enabled, ca_file, domain
//	[state]           path, storage ("file" | "http")
//	[state.http]      url, load_method, save_method, timeout, request_headers, retry
//	[connectors]      config_type = "local": config_dir
//	                  config_type = "http":  base_url, timeout, request_headers,
//	                  url_templates, [connectors.response] data_path, error_path,
//	                  [connectors.retry] enabled, max_attempts, initial_backoff,
//	                  max_backoff, backoff_multiplier
//	[http]            enabled, address, api_key, [http.cors] enabled,
//	                  allowed_methods, allowed_origins, allowed_headers,
//	                  exposed_headers, allow_credentials, allow_private_network,
//	                  [http.metrics] enabled, endpoint, [http.tls] enabled,
//	                  cert_file, key_file
//	[telemetry]       enabled, service_name, [telemetry.logs] / [telemetry.traces]
//	                  transport ("grpc" | "http"), endpoint; exported by
//	                  package telemetry (traces, logs and metrics over OTLP)
//	[logging]         format ("text" | "json")
//
// Defaults are upstream's (http.address "127.0.0.1:8081", state.path
// "local_state", connectors.timeout "10s", retry 3 attempts from "1s" to
// "30s" doubling, http.metrics.endpoint "/metrics", ...), except the one
// Ferry extension below.
//
// Ferry extensions (not in upstream's runtime):
//
//   - iggy.address "" or "embedded" runs Ferry's embedded broker; it is the
//     default (upstream defaults to "localhost:8090").
//   - iggy.create_missing (bool, default false) creates the streams and
//     topics that connectors name.
//   - logging.level ("debug" | "info" | "warn" | "error", default "info").
//   - state.storage = "iggy" keeps source state in an Iggy topic,
//     [state.iggy] stream ("ferry") and topic ("state"), that every
//     runtime of a scale-out reads (package state/iggystate).
//   - [scale_out] enabled runs each source in one runtime at a time under
//     a lease kept in Iggy (package lease): lease_stream ("ferry"),
//     renew_interval ("500ms"), hold_timeout ("2s"), takeover_delay ("3s",
//     longer than hold_timeout). It needs state.storage = "iggy" and an
//     Iggy server in [iggy] address.
//   - [telemetry.metrics] transport, endpoint (default: [telemetry.traces]'
//     transport and endpoint) and interval (default "60s"): the runtime's
//     Prometheus metrics exported through OTLP as well.
//   - A sink's [[streams]] takes delivery keys: max_retries (default 3),
//     retry_backoff ("100ms"), max_retry_backoff ("10s"), on_error
//     ("stop", the default, or "dead_letter"), dead_letter_stream (default:
//     the stream read) and dead_letter_topic (default "<key>_dead_letter"),
//     used only with on_error = "dead_letter". Offsets are committed only
//     after the sink accepts a batch.
//   - A source's [[streams]] takes on_error ("dead_letter", the default,
//     or "stop"), dead_letter_stream (default: the stream produced to) and
//     dead_letter_topic (default "<key>_dead_letter"), for a message that
//     cannot be sent to that stream (it does not convert to the stream's
//     schema, or Iggy would refuse it). Unset, they stay empty, and
//     [ProducerStream.DeadLetterTarget] applies the defaults.
//
// Decoding is strict: an unknown key, a value of the wrong type, a missing
// required key, a bad duration or a value outside its list is an error
// naming the file, the line when it can be found, the dotted key with list
// indexes (streams[1].linger_time) and what was expected. All the problems
// of a file are reported at once, as an [Errors] list of [FieldError].
// Durations are humantime strings: "5ms", "1s", "1h 30m".
//
// Relative paths in config.toml (state.path, connectors.config_dir,
// iggy.tls.ca_file, http.tls.cert_file, http.tls.key_file) are resolved
// against the directory of config.toml, and avro_schema_path against the
// connector file's directory. Upstream resolves them against the working
// directory, and its example files name paths from the repository root;
// so a path that must exist (all but state.path) and does not exist next
// to the file but does exist relative to the working directory is taken
// from the working directory.
//
// # Environment
//
// A .env file named by IGGY_CONNECTORS_ENV_PATH is read first (KEY=VALUE
// lines, "export", comments, quotes; see [ParseDotenv]); its variables
// never replace variables already set. Empty values count as unset.
//
// Runtime keys: IGGY_CONNECTORS_<SECTION>_<KEY>, every section and key
// upper-cased and joined with '_': IGGY_CONNECTORS_IGGY_ADDRESS,
// IGGY_CONNECTORS_HTTP_METRICS_ENABLED, IGGY_CONNECTORS_CONNECTORS_CONFIG_DIR
// (the section is named connectors too), IGGY_CONNECTORS_STATE_HTTP_RETRY_MAX_ATTEMPTS.
// request_headers and url_templates are not addressable, as upstream.
//
// Connector keys: IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_<FIELD>, with the
// connector key upper-cased (upstream keeps other characters as they are;
// Ferry also accepts them turned into '_', so key "pg-sink" is PG-SINK or
// PG_SINK). List entries take their index: IGGY_CONNECTORS_SINK_PG_STREAMS_0_TOPICS.
// Variables change existing entries; they cannot add a [[streams]] entry.
// type, key, plugin_config and transforms are not addressable this way.
//
// Values are typed by their key: true/false (also 1/0, yes/no, on/off),
// integers, durations, one of a list, and lists as "[a, b]" (upstream's
// form) or "a,b". A value that does not fit is an error naming the
// variable, the key and the expectation.
//
// plugin_config fields: IGGY_CONNECTORS_<SOURCE|SINK>_<KEY>_PLUGIN_CONFIG_<FIELD>
// sets the top-level field, lower-cased (or matching an existing field
// case-insensitively), adding it when missing; this is how credentials are
// passed. An existing field keeps its type (a string stays a string even
// when the value looks like a number); a new field's type is inferred as
// upstream does (true/false, integer, float, [list], string), and a value
// inferred as anything but a string is an [EnvValue] that keeps the
// variable's exact text: connector.Spec.Parse gives that text to
// a string field ("0042" stays "0042") and the inferred value to others.
// ..._PLUGIN_CONFIG_FORMAT is the plugin_config_format key, never a field.
// Adding new fields needs the list of variable names, which [EnvFunc]
// may not provide; overriding existing fields needs only lookups.
//
// Unknown IGGY_CONNECTORS_* variables are reported as warnings
// ([Runtime.Warnings], [ConnectorSet.Warnings]), with a suggestion.
//
// # Connector files and versions
//
// The local provider ([Store]) reads every *.toml file directly inside
// connectors.config_dir, skipping hidden files and Cargo.toml, one
// connector version per file. A file names its connector (type, key) and
// its version:
//
//	type = "source" | "sink"    required
//	key = "random"              required; letters, digits, '-', '_', '.'
//	enabled = true              default true
//	version = 0                 default 0
//	name, path, plugin_config_format, verbose, benchmark
//	[plugin_config]             kept as plain values for the connector's own spec
//	[transforms.<name>]         kept as plain tables, in file order
//	[[streams]]                 at least one; see ProducerStream, ConsumerStream
//
// Files sharing a type and key are versions of one connector; file names
// do not matter when reading. One version per connector is active: the
// version recorded in config_dir/.active_versions.toml,
//
//	[sinks]
//	stdout = 1
//	[sources]
//	random = 0
//
// else the highest version. This is upstream's scheme, so a directory works
// with both runtimes. [Store.Create] writes a new version to
// <type>_<key>_<version>.toml (upstream's name for API-created versions),
// numbered one above the highest; [Store.SetActive] rewrites
// .active_versions.toml; both write a hidden temporary file, sync it and
// rename it into place. [Store.Delete] refuses the active version (upstream
// deletes it and activates the highest remaining one).
// [Store.DeleteConnector] (Ferry extension, for the API's DELETE
// /sinks/{key}) removes every version file of a connector and its active
// entry. A version's creation time is its file's modification time.
//
// Loading never stops at a broken file: [Provider.Load] returns the
// connectors that loaded and a [LoadError] per file that did not, with the
// connector's type and key when they could be read (else the file name).
// When no version is recorded as active and the highest version's file is
// broken, the highest good version is loaded and the broken file is
// reported. A malformed .active_versions.toml fails the whole load.
//
// # HTTP provider
//
// With config_type = "http", [HTTPProvider] fetches configurations from
// base_url using upstream's URL templates (create_sink, get_active_configs,
// get_active_versions, set_active_sink, get_sink_configs, get_sink_config,
// get_active_sink_config, delete_sink_config and the source equivalents;
// placeholders {key} and {version}), sends request_headers with every
// request, bounds each request by timeout, and retries connection errors,
// timeouts, 408, 429 and 5xx answers with exponential backoff and jitter
// (max_attempts retries after the first request; 4xx answers are final).
// In a JSON answer, a value at response.error_path other than null fails
// the request with that value as the message; the payload is at
// response.data_path (dot-separated keys, numeric segments index arrays),
// else the whole body. Environment overrides apply to fetched connectors
// too.
//
// # Secrets
//
// iggy.password, iggy.token, http.api_key, request header values,
// state.http.url, plugin_config fields whose names look secret (password,
// token, secret, api_key, *_key, credential, auth, ...) and passwords in
// URLs and DSNs are replaced by "****" in String, GoString and LogValue
// output, and never echoed in error messages.
package config
