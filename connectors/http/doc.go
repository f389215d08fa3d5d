// Package httpsink is the `http` sink (directory connectors/http): it
// delivers the messages of Iggy topics to an HTTP endpoint (webhooks, REST
// APIs, serverless functions). It reads upstream's HTTP sink configuration
// (libiggy_connector_http_sink) unchanged and adds secrets from the
// environment and request signing. It also owns Sign and Verify, the
// signature scheme receivers use to check requests.
//
// plugin_config (upstream's keys, then Ferry's):
//
//	url = "https://api.example.com/ingest"   # required
//	method = "POST"                # GET, HEAD, POST, PUT, PATCH, DELETE
//	timeout = "30s"                # per request attempt
//	batch_mode = "individual"      # individual | ndjson | json_array | raw
//	include_metadata = true        # wrap each payload in {"metadata": ..., "payload": ...}
//	include_checksum = false       # metadata.iggy_checksum
//	include_origin_timestamp = false # metadata.iggy_origin_timestamp
//	max_payload_size_bytes = 10485760 # a request body's limit; 0 = none
//	max_retries = 3                # retries of a request inside one Consume
//	retry_delay = "1s"             # first wait, multiplied by
//	retry_backoff_multiplier = 2.0 # after each retry, up to
//	max_retry_delay = "30s"        # the cap (also caps Retry-After)
//	success_status_codes = [200, 201, 202, 204]
//	health_check_enabled = false   # send health_check_method to url in Open
//	health_check_method = "HEAD"
//	tls_danger_accept_invalid_certs = false
//	max_connections = 10           # idle connections kept per host
//	verbose_logging = false        # log each request (status, size; never headers)
//	headers = { Authorization = "Bearer ${API_TOKEN}" }
//	signing_secret = "${WEBHOOK_SECRET}" # Ferry: sign each request (see below)
//	signature_header = "X-Ferry-Signature"
//	timestamp_header = "X-Ferry-Timestamp"
//	request_id_header = "X-Ferry-Request-Id"
//
// # Secrets from the environment
//
// In url, header values and signing_secret, ${NAME} is replaced by the
// environment variable NAME when the sink is built; a variable that is not
// set is an error naming it (never its value). "$${" writes a literal
// "${"; a "$" not followed by "{" is kept as it is. Header values and the
// secret are never logged, and errors name the URL without its query
// string or user information.
//
// # Batch modes
//
//   - individual: one request per message, body = the envelope (or the
//     payload alone with include_metadata = false), application/json.
//   - raw: one request per message, body = the payload bytes as they are,
//     application/octet-stream; no envelope.
//   - ndjson: one request per batch, one envelope per line, each line ends
//     in "\n", application/x-ndjson.
//   - json_array: one request per batch, a JSON array of envelopes,
//     application/json.
//
// A batch whose body would pass max_payload_size_bytes is split into
// several requests; one message that alone passes it is rejected. A
// Content-Type in headers replaces the mode's.
//
// The envelope is
//
//	{"metadata":{"iggy_id":"<uuid>","iggy_offset":N,"iggy_timestamp":µs,
//	  "iggy_stream":"s","iggy_topic":"t","iggy_partition_id":N},"payload":P}
//
// where P is the JSON payload (compacted), a JSON string for text streams,
// or {"data":"<base64>","iggy_payload_encoding":"base64"} for any other
// schema. iggy_id is the message id's 16 bytes written as a UUID, in
// the order they are stored.
//
// # Failures, retries and the dead-letter path
//
// A status in success_status_codes is success. 408, 429, any 5xx, a
// timeout or a network error is transient: the request is retried inside
// Consume up to max_retries times, waiting retry_delay, multiplied by
// retry_backoff_multiplier each time, capped at max_retry_delay; a
// Retry-After header (seconds or an HTTP date) replaces the computed wait,
// capped the same way. When the retries run out, the error is marked
// connector.Unavailable: the endpoint is down or overloaded, which says
// nothing about the messages. The runtime then dead-letters nothing and
// commits nothing: it retries the batch, then restarts the sink with
// backoff and delivers the batch again until the endpoint answers. Any
// other status (4xx, 3xx, an unlisted 2xx) is permanent: the error is
// wrapped with connector.Permanent, so the runtime dead-letters the
// messages at once (with on_error = "dead_letter").
//
// In individual and raw modes Consume returns a connector.MessageErrors
// naming exactly the messages that failed (wrapped with Permanent when all
// of them failed permanently); after three requests in a row fail
// transiently the rest of the batch is not attempted and is reported
// failed too, marked Unavailable like them, so a dead endpoint is not
// hammered. In ndjson and json_array modes a failed single request returns
// its error for the whole batch; on a permanent one the runtime tries each
// message on its own to isolate a poison one.
//
// # Request ids
//
// Every request carries X-Ferry-Request-Id (request_id_header): 32 hex
// digits naming the request, derived from the sink's key, the stream,
// topic and partition, the first message's id and the offsets of the
// request's first and last message. Every attempt of a request carries
// the same id: the retries inside Consume, and the runtime's retries when
// it delivers the batch again. When the runtime splits a failing batch to
// isolate a poison message, the smaller requests get their own ids; the
// messages' metadata.iggy_id (with iggy_stream, iggy_topic and
// iggy_partition_id) names each message for receivers that dedupe per
// message.
//
// # Signing
//
// With signing_secret set, every request attempt also carries:
//
//	X-Ferry-Timestamp: <unix seconds when the attempt was made>
//	X-Ferry-Signature: sha256=<lowercase hex HMAC-SHA256(secret, signed string)>
//
// where the signed string is, joined with "\n" (a line feed):
//
//	timestamp header value
//	request id header value
//	method (POST, ...)
//	the URL's escaped path, "/" when empty, without the query
//	the exact request body bytes (last, after the fourth "\n")
//
// A receiver recomputes the HMAC over what it received, compares in
// constant time, and rejects a timestamp further than its tolerance from
// its clock, so a captured request cannot be replayed later, nor sent to
// another path or with another method. Within the tolerance a captured
// request still verifies: the receiver keeps the request ids it acted on
// for at least twice the tolerance and does not act on a request whose
// id it has seen. It answers such a duplicate with a success status (it
// is usually a retry whose first answer was lost; an error status would
// make Ferry retry or dead-letter it). Verify and VerifyRequest do the
// checks (VerifyRequest returns the request id to look up); the
// receiver keeps the ids.
//
// signing = "standard-webhooks" signs instead with Standard Webhooks
// (package webhooksig): webhook-id (the request id, the same on every
// attempt), webhook-timestamp, and webhook-signature with one
// "v1,<base64>" per secret (signing_secret, then each signing_secret_env
// variable, for rotation; secrets are whsec_<base64>). Ferry's headers
// are then not sent. The default, "ferry", is the scheme above.
package httpsink
