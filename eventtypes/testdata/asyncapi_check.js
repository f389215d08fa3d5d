// Parses the AsyncAPI document on stdin with @asyncapi/parser (Avro and
// Protobuf schema parsers registered when installed next to it) and
// prints every diagnostic as a JSON line; exits 1 when any has severity
// error (0), 2 when the parser cannot run. Run by asyncapi_node_test.go
// with NODE_PATH set to the node_modules directory of the packages.
'use strict';
const { Parser } = require('@asyncapi/parser');

function optional(name, exported) {
  try {
    return require(name)[exported]();
  } catch (e) {
    if (e && e.code === 'MODULE_NOT_FOUND') return null;
    throw e;
  }
}

async function main() {
  const chunks = [];
  for await (const c of process.stdin) chunks.push(c);
  const text = Buffer.concat(chunks).toString('utf8');
  const parser = new Parser();
  const registered = [];
  for (const [name, exported] of [['@asyncapi/avro-schema-parser', 'AvroSchemaParser'], ['@asyncapi/protobuf-schema-parser', 'ProtoBuffSchemaParser']]) {
    const p = optional(name, exported);
    if (p) { parser.registerSchemaParser(p); registered.push(name); }
  }
  const { document, diagnostics } = await parser.parse(text);
  let errors = 0;
  for (const d of diagnostics) {
    if (d.severity === 0) errors++;
    console.log(JSON.stringify({ severity: d.severity, code: d.code, message: d.message, path: d.path }));
  }
  console.log(JSON.stringify({ summary: true, parsed: !!document, errors, registered,
    channels: document ? document.channels().length : 0,
    operations: document ? document.operations().length : 0,
    messages: document ? document.components().messages().length : 0 }));
  process.exit(errors > 0 || !document ? 1 : 0);
}

main().catch((e) => { console.error(e && e.stack ? e.stack : String(e)); process.exit(2); });
