// Package eventtypes owns the declared event types of a deployment: the
// catalog built from the runtime's configuration (config.toml's
// [events."NAME"] entries and the produces / consumes keys of the
// connectors' [[streams]] entries, see config/events.go) and from the
// connectors' specs (connector.Spec.Events: a built-in's, declared in
// code, or a plugin's, in its manifest's [[events]] tables), the validation
// of payloads against the types' schemas, the AsyncAPI 3.0 document of
// the deployment, and the checks of `ferry events check`.
//
// # Catalog
//
// [Build] reads the configuration and returns a [Catalog]: every type with
// its schema, compiled once, and who produces and consumes it. A source
// stream produces the types it lists in produces; a sink stream consumes
// the types it lists in consumes, on each topic it reads; a type whose
// entry lists topics ("stream/topic") is produced by every source writing
// one of them and consumed by every sink reading one, and the topic
// itself counts as a producer (a writer outside Ferry). A sink with key
// "hook-NAME" and path exec is a hook (`ferry hook create`). Disabled
// connectors are left out. A name that is not in the catalog, or a schema
// that does not compile, is an error naming the file, line and key; the
// catalog is still returned with what could be built.
//
// # Declarations in connectors' specs
//
// With [WithRegistry] (or [WithSpecs]), Build also reads the event types
// each enabled connector's spec declares: a source produces them, a sink
// consumes them, on every topic of its [[streams]] entries, or on those
// the declaration's topics name ("TOPIC" or "STREAM/TOPIC"). A plugin
// declares them in ferry-plugin.toml (package plugin):
//
//	[[events]]
//	name = "line.read"
//	version = "1.0.0"
//	schema_path = "schemas/line.json"  # relative to the manifest; or schema, inline (JSON text or a table)
//	format = "json_schema"             # the default; "avro", "proto" (with message_type)
//	topics = ["lines"]                 # default: all of the connector's topics
//
// and a built-in with connector.Spec.DeclareEvents. The runtime, GET
// /events, GET /asyncapi.yaml and `ferry events` all build the catalog
// this way, so such a type is validated at the edges, listed and checked
// like one of config.toml. Each type's Origin says where its declaration
// is: "config FILE:LINE", "plugin NAME's manifest FILE (events[i])" or
// "the spec of connector NAME" (in the AsyncAPI document, the message's
// x-ferry.declared_by). A name declared twice: config.toml's entry wins
// over a spec's (the spec's still says its connector produces or
// consumes the type; Shadowed lists the spec's declaration, and Check
// warns when its schema differs); between specs the first connector's
// (sources first, then by key) wins, the same schema elsewhere is listed
// in Shadowed, and a different one is an error naming both. A spec whose
// schema does not compile is an error naming the manifest and the key
// (events[0].schema); a path that names no connector declares nothing.
// The runtime builds each connector's checks from config.toml and that
// connector's own declarations only, so a conflict between two specs is
// reported by GET /events and `ferry events check`, and each connector
// validates against its own spec's schema.
//
// # Validation
//
// [Catalog.Validate] checks a JSON payload against a type: JSON Schema
// types with github.com/santhosh-tekuri/jsonschema/v6 (draft 2020-12 by
// default, or the draft the schema's $schema names; $ref to other files
// resolves against the schema file's directory, never over the network),
// Avro and Protobuf types through package codec (the JSON must map to the
// schema, unknown members refused). [Catalog.ValidateEncoded] takes a
// payload in its stream's schema: Avro or Protobuf bytes are decoded with
// the type's codec, a JSON Schema type needs JSON. A failure is a
// [*ValidationError] listing each problem at its JSON pointer. Which type
// a message is: the only type its stream declares, else its ce_type
// header (CloudEvents' Kafka binding), else its JSON payload's top-level
// "type" member (CloudEvents structured mode), which must be one the
// stream declares ([Catalog.TypeOf]). The schema describes the whole
// payload.
//
// # AsyncAPI
//
// [Catalog.AsyncAPI] renders the deployment as an AsyncAPI 3.0.0 document
// (YAML): the Iggy server, every topic a connector or a type names as a
// channel (address "stream/topic"), each type as a message in
// components.messages with its schema (JSON Schema as an AsyncAPI schema
// in components.schemas, local $refs rewritten to point there; Avro and
// Protobuf as multi-format schemas), sources as send operations, sinks
// and hooks as receive operations. Tested: the document of a sample
// deployment is accepted by the @asyncapi/parser package (v3.6.6) with no
// diagnostic of severity error (asyncapi_node_test.go, which needs node
// and the package: FERRY_ASYNCAPI_PARSER_DIR, set by scripts/test.sh).
//
// # Checks
//
// [Catalog.Check] reports consumers of types nobody produces, or that are
// produced only on other topics (errors), and types produced or declared
// that nobody consumes (warnings). [Compare] reports the changes between
// an older catalog and a newer one that break a consumer: a consumed type
// removed; in a JSON Schema, a property that was required removed or made
// optional, a type changed or narrowed, a new required property, an enum
// value removed, additionalProperties closed (local $refs followed); in an
// Avro record, a field removed, its type changed, a new field without a
// default, an enum symbol removed. Protobuf schemas are compared as text
// only (a change is a warning). Catalogs are saved and read back as the
// JSON of GET /events ([Catalog.MarshalJSON], [ParseCatalog]).
//
// Left out: the gRPC Spec call does not carry event types (a plugin
// declares them in its manifest; an executable named without a manifest
// declares none); schema registries; JSON Schema comparison through
// remote or file $refs.
package eventtypes
