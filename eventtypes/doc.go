// Package eventtypes owns the declared event types of a deployment: the
// catalog built from the runtime's configuration (config.toml's
// [events."NAME"] entries and the produces / consumes keys of the
// connectors' [[streams]] entries, see config/events.go), the validation
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
// Left out: plugins' manifests do not declare event types yet (a plugin's
// streams declare them in its connector file like any connector); schema
// registries; JSON Schema comparison through remote or file $refs.
package eventtypes
