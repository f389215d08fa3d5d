// Package webhook is the `webhook` source: an HTTP listener of its own
// that receives webhooks and answers 2xx only once each delivery is
// durably in Iggy.
//
//	type = "source"
//	key = "github"
//	path = "webhook"
//
//	[[streams]]
//	stream = "webhooks"
//	topic = "github"
//	schema = "json"
//
//	[plugin_config]
//	address = "0.0.0.0:8088"         # its own listener; the management API stays on loopback
//	# tls_cert_file = "cert.pem"     # HTTPS, with tls_key_file
//	max_body_size = "1MiB"           # larger bodies answer 413, unread
//	max_pending = 1000               # requests waiting at once; more answer 429 + Retry-After
//	wait_timeout = "10s"             # a request not stored by then answers 503 + Retry-After
//	dedup_window = "72h"             # delivery ids remembered (in the source's state)
//	dedup_max_entries = 10000
//	forward_headers = ["X-GitHub-Event"]
//
//	[[plugin_config.endpoints]]
//	path = "/github"
//	verify = "github"                # standard-webhooks | github | stripe | hmac | bearer | basic | none
//	secret_env = ["GH_SECRET", "GH_SECRET_OLD"]   # or secret = "${GH_SECRET}"; any one verifies
//	# topic = "other"                # a topic of the [[streams]] stream instead of its own
//	# format = "json"                # json | form (urlencoded, sent as a JSON object) | raw
//	# id_header = "X-Request-Id"     # the delivery id to deduplicate by, for hmac/bearer/basic/none
//
// # Delivery: what a 2xx means
//
// A handler verifies the request, queues it and waits. Poll hands queued
// deliveries to the runtime; the runtime sends the batch to Iggy, saves
// the source's state (the dedup window, now holding the batch's ids) and
// calls Ack, which answers the waiting requests 200 {"status":"stored"}.
// So a 2xx is sent only after the message is in Iggy and its delivery id
// is saved: a kill -9 at any moment loses no delivery that got a 2xx
// (tested: TestKillNineLosesNothing), and a provider retries every
// delivery that did not get one.
//
// On Nack (the send or the save failed) the requests keep waiting: the
// runtime sends the same batch again. A request that waits wait_timeout
// answers 503 with Retry-After; its delivery stays queued, so the
// provider's retry joins it while it is waiting, or is answered 200
// "duplicate" once it is stored. When the source closes (a restart, a
// stop), waiting requests answer 503.
//
// Statuses: 200 stored or duplicate; 400 an empty body, a body that is
// not JSON (format json) or not a form (format form); 401 verification
// failed (logged with the endpoint, the peer and the reason, never a
// secret or an expected signature); 404 an unknown path (or an expired
// endpoint_id); 405 another method than the endpoint's (with Allow); 413
// a body over max_body_size (by Content-Length before reading anything,
// or while reading with http.MaxBytesReader, so a flood of large bodies
// costs no memory); 415 a form endpoint's request that is not
// application/x-www-form-urlencoded; 429 with Retry-After when
// max_pending requests are already waiting; 503 with Retry-After when a
// delivery is not stored within wait_timeout or the source is closing.
//
// # Deduplication and message ids
//
// The provider's delivery id is webhook-id (standard-webhooks),
// X-GitHub-Delivery (github), the event's "id" in the body (stripe), or
// the id_header of any endpoint. A delivery's message id is
// UUIDv5(namespace, endpoint path + "\x00" + delivery id) (MessageID), so
// a retried delivery has the id its first attempt had. Ids the source
// handed the runtime are remembered for dedup_window (at most
// dedup_max_entries, oldest forgotten first) in the source's state; a
// delivery whose id is remembered answers 200 "duplicate" and sends
// nothing, and one whose id is still waiting joins the waiting request.
// A replay of a captured request within the signature's tolerance is such
// a duplicate; after it, the timestamp is stale (401). The tolerance may
// not exceed dedup_window. Deliveries without a delivery id (an endpoint
// of verify none, bearer, basic or hmac without id_header) get random
// ids and are not deduplicated.
//
// What is not exactly-once: a batch sent to Iggy whose state save was
// cut short by a kill -9 is not remembered; its requests got no 2xx, so
// the provider retries them, and they are sent again with the same
// message ids. An Iggy server (or Ferry's broker) with message
// deduplication by id (ferry serve --dedup-max-entries, upstream's
// [system.message_deduplication]) keeps one; otherwise a consumer dedupes
// by id. The kill test runs the broker with deduplication and finds every
// acknowledged delivery exactly once.
//
// # Messages
//
// Payload: the body as received (json, raw) or the form as a JSON object
// (form): a field given once is a string, more than once an array of
// strings. Headers: each request header of forward_headers that is
// present, under its name as configured, values joined with ", " and cut
// to 255 bytes (Authorization, Proxy-Authorization and Cookie are
// refused); with include_http_metadata (default true) also upstream's
// iggy_source_instance (instance_name, default the connector key),
// iggy_http_remote_addr and iggy_http_received_at (µs, uint64), and
// Ferry's webhook_endpoint (the path) and webhook_delivery_id. An
// endpoint's topic routes its messages to that topic of the [[streams]]
// stream (Message.Route); a per-endpoint stream is not possible, since a
// source's messages go to every [[streams]] stream.
//
// # Upstream's http source
//
// Upstream's TOML (libiggy_connector_http_source, also path =
// "http_source") loads unchanged: listen_addr (as address),
// max_body_size_bytes, buffer_capacity (as max_pending), max_batch_size,
// include_http_metadata, instance_name, forward_headers, topic_path with
// auth_bearer_token (POST /topics/<topic_path>, raw bodies), and
// endpoints with endpoint_id (POST /e/<endpoint_id>, raw bodies),
// auth_type (none, bearer, hmac-sha256, hmac-sha1), auth_secret,
// hmac_header (default X-Hub-Signature-256), hmac_prefix (default
// sha256=) and expires_at. admin_listen_addr, management_token and
// max_consecutive_nacks are accepted and unused: Ferry has no endpoint
// management API (endpoints are configuration, changed through the
// runtime's API like any connector's) and retries a batch until it is
// stored. Upstream answers 200 when a request is buffered in memory;
// this source answers only once the message is in Iggy.
//
// # Tested against
//
// The embedded broker through the real runtime (connectortest), the
// source conformance suite, a kill -9 test with a load generator posting
// 10,000 signed deliveries and retrying on any non-2xx, refusals of bad,
// stale and replayed signatures, a flood over the body limit with the
// bytes allocated during it measured, each provider's documented test
// vectors (in package webhooksig; bearer and basic against the examples
// of RFC 6750 and RFC 7617, here), and a fuzz test of the request
// handling and of the state decoder.
//
// Left out: upstream's endpoint management API and shared listeners
// between connectors (each webhook source has its own address);
// asymmetric Standard Webhooks signatures (v1a); providers that sign the
// URL or form parameters (Twilio).
package webhook
