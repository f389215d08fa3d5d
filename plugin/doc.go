// Package plugin is Ferry's contract with out-of-process connectors:
// programs in any language that Ferry starts, supervises and talks to,
// and that behave, to the runtime, exactly as built-in connectors do.
//
// The contract has three parts.
//
//   - The manifest, ferry-plugin.toml (Manifest, LoadManifest): the
//     plugin's name and kind (source, sink or transform), the command that
//     starts it, its transport ("grpc", or "lines" for scripts), its
//     settings (declared inline or asked of the plugin with the Spec call),
//     the environment variables it may see, and its limits: a deadline per
//     call, a memory limit and the restart backoff; and the event types
//     it produces or consumes ([[events]] tables with a JSON Schema, Avro
//     or Protobuf schema, which become the spec's connector.Spec.Events
//     and join the deployment's catalog: package eventtypes; the Spec
//     call does not carry them). A connector file names
//     a plugin with path = "…/ferry-plugin.toml", or names the executable
//     itself (then the defaults apply and the Spec call declares the
//     settings); relative paths are resolved against the connector file's
//     directory.
//   - The handshake (Handshake): hashicorp/go-plugin's. Ferry starts the
//     command with FERRY_PLUGIN_MAGIC_COOKIE=ferry-connector-plugin and
//     PLUGIN_PROTOCOL_VERSIONS, PLUGIN_MIN_PORT and PLUGIN_MAX_PORT in its
//     environment; the plugin listens on a loopback address and prints
//     "1|1|tcp|127.0.0.1:PORT|grpc" on standard output. Go plugins get this
//     from package plugin/sdk; any other language can do it by hand
//     (docs/plugins.md).
//   - The services of proto/ferry/plugin/v1/plugin.proto (Go code in
//     plugin/pluginpb): Plugin.Spec, and Source (Open, Poll, Ack, Nack,
//     Close), Sink (Open, Consume, Close) or Transform (Open, Apply,
//     Close), mirroring connector.Source, connector.Acker and
//     connector.Sink message for message.
//
// Package plugin/host is the runtime's side: it resolves a connector's
// path to a plugin (connector.Registry's resolver), checks plugin_config
// against the plugin's settings like a built-in's, and runs the plugin
// behind adapters that implement connector.Source, connector.Acker and
// connector.Sink. The runtime's own machinery then owns state, acks,
// offsets, retries and dead letters. A plugin process that exits, misses
// its call deadline, runs out of its memory limit or answers garbage is
// killed, the call fails the way an unavailable destination fails, and
// the batch in flight is delivered again: never lost, never committed.
//
// Package plugin/sdk is the Go SDK: implement connector.Source or
// connector.Sink (with a connector.Spec) and call sdk.Serve.
package plugin
