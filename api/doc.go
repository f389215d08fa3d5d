// Package api is the connector runtime's HTTP management API. It serves the
// paths, methods, status codes and JSON shapes of the Apache Iggy connector
// runtime's API, so that upstream's tools and dashboards work against Ferry:
//
//	GET    /                                  "Connector Runtime API" (text)
//	GET    /health                            {"status":"healthy"}
//	GET    /stats                             runtime and per-connector statistics
//	GET    <[http.metrics] endpoint>          Prometheus metrics, when enabled
//	GET    /sinks                             every sink (same for /sources)
//	GET    /sinks/{key}                       one sink with its streams
//	GET    /sinks/{key}/transforms            its transforms, [{"type","config"}]
//	GET    /sinks/{key}/configs               every configuration version
//	POST   /sinks/{key}/configs               store a new version (200, the version)
//	DELETE /sinks/{key}/configs?version=N     delete a version (204)
//	GET    /sinks/{key}/configs/{version}     one version
//	GET    /sinks/{key}/configs/active        the running configuration
//	PUT    /sinks/{key}/configs/active        {"version": N} selects the active version (204)
//	GET    /sinks/{key}/configs/plugin        plugin_config as ?format=json|yaml|toml|text
//	POST   /sinks/{key}/restart               restart this connector alone (204)
//	DELETE /sinks/{key}                       Ferry: stop the connector and delete every
//	                                          configuration version of it (204)
//	GET    /sinks/{key}/dead_letters          Ferry: the dead-letter topics it writes to, with
//	                                          counts and letters (?offset=N&limit=M per
//	                                          partition; default the newest 50)
//	POST   /sinks/{key}/dead_letters/replay   Ferry: replay letters of one of those topics
//	                                          ({"stream","topic"}, optional "to", "partition"
//	                                          and "offset" for one letter, "dry_run"; package dlq)
//	GET    /streams                           Ferry: the Iggy server's streams and topics
//	GET    /ui/...                            Ferry: the web console (package console; its
//	                                          pages check their session themselves)
//	POST   /ui/login-links                    Ferry: a one-time console login link (the key only)
//
// The web console's session cookie is a credential too (api/console.go):
// a request without the key that carries a live session is served, and
// one that changes state only from the API's own origin.
//
// Errors are {"code": "...", "reason": "..."} with upstream's codes
// (sink_not_found, sink_config_not_found, invalid_configuration,
// invalid_connector_key, error, ...) and statuses: 400 for bad input (the
// reason names the field), 401 without the API key, 404 for an unknown
// connector or version, 409 when deleting the active version, 501
// (not_supported) for DELETE /{kind}s/{key} with the HTTP provider, 500
// otherwise; Ferry's guards below answer 403 and 415.
//
// "active" in a configuration listing and GET .../configs/active is the
// version selected to run: PUT .../configs/active changes it at once, and
// the next restart (POST .../restart) runs it. Ferry adds "running" (the
// version the connector runs now) and, on an active version that does not
// run yet, "restart_required": true. Neither the active nor the running
// version can be deleted (409 config_version_active,
// config_version_running). A configuration answer posted back as a new
// version may keep these keys.
//
// Guards against web pages (Ferry; upstream has none), before anything
// else: the operator's browser must not become a way in, since the API
// can run commands (exec sinks).
//
//   - Host: while the API listens on a loopback address, a request whose
//     Host header names anything but a loopback IP, localhost or the host
//     of [http] address is refused (403 host_not_allowed). This stops DNS
//     rebinding, where a page's own name is made to resolve to 127.0.0.1.
//   - Origin: a request with an Origin header that [http.cors]
//     allowed_origins does not allow (any, when CORS is disabled), and that
//     is not the API's own origin, is refused (403 origin_not_allowed) when
//     its method is not GET, HEAD or OPTIONS, and whatever its method when
//     no api_key is configured. curl and programs send no Origin.
//   - Bodies: a request body must be Content-Type application/json (or
//     */*+json): 415 unsupported_media_type otherwise, as upstream's JSON
//     extractor answers. Browsers can send text/plain and form bodies
//     without asking (no preflight), never JSON.
//
// A credential, always (Ferry; upstream's API is open without api_key):
// the API can write files and run commands as the runtime's user, so it
// never answers a caller without one. With [http] api_key every request
// but GET / and /health carries the key in the api-key header (compared in
// constant time), as upstream. Without it, the server makes a random
// local token when it starts and writes it, mode 0600, to
// ~/.config/ferry/api/<host>_<port>.token (package internal/apitoken),
// where ferry commands run by the same user find it; everyone else is
// refused (401 unauthorized). GET /stats and the metrics endpoint, which
// hold no secrets, stay open without api_key unless [http] public_reads =
// false, for scrapers and dashboards.
//
// What the API stores and starts passes one check: creating a version
// (POST .../configs), activating one (PUT .../configs/active) and
// restarting a connector (which loads its active version) all refuse,
// with 400 invalid_configuration, a configuration the runtime would not
// run (runtime.Admit): an unknown path, transforms or schemas that do not
// build, a plugin_config the connector rejects, files inside the
// runtime's own directories (connector.Paths). Answers redact secrets
// (config.Connector.Redacted); a configuration read, edited and posted
// back gets them again from its version (config.Unredact).
//
// Cross-cutting behaviour follows the [http] section: [http.cors] answers preflight
// requests and decorates responses as upstream's CORS layer does; [http.tls]
// serves HTTPS. At startup the server warns, like upstream, when it is
// reachable beyond loopback without an API key or without TLS, and when
// CORS admits any origin without an API key.
//
// [New] builds a [Server] over a [Runtime] (implemented by
// *runtime.Runtime); [Server.Start] listens, [Server.Shutdown] stops
// gracefully, and [Server.Handler] is the whole API for embedding.
package api
