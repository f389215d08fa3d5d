// node-source: an example Ferry source plugin in Node.js on gRPC.
//
// It sends each line of the file named by the `path` setting of
// [plugin_config] as a message. Its state is the number of lines sent (as
// decimal text), and each message's id is derived from its line number, so
// a batch read again after a restart carries the same ids. It implements
// plugin/proto/ferry/plugin/v1/plugin.proto (the Plugin and Source services),
// loaded at run time with @grpc/proto-loader, and go-plugin's handshake by
// hand. See README.md.
'use strict';

const fs = require('fs');
const path = require('path');

// The packages, required in main once the magic cookie is checked, with a
// clear last word on standard error when they are not installed.
let grpc;
let protoLoader;

function requirePackages() {
  try {
    grpc = require('@grpc/grpc-js');
    protoLoader = require('@grpc/proto-loader');
  } catch (e) {
    log(`${e.code === 'MODULE_NOT_FOUND' ? 'its packages are not installed' : e.message}: run npm ci in ${__dirname}`);
    process.exit(1);
  }
}

const MAGIC_COOKIE_KEY = 'FERRY_PLUGIN_MAGIC_COOKIE';
const MAGIC_COOKIE_VALUE = 'ferry-connector-plugin';
const CORE_PROTOCOL = 1; // go-plugin's
const APP_PROTOCOL = 1; // the contract's: ferry.plugin.v1

const NAME = 'node-source';
const SUMMARY = 'sends each line of a file as a message (an example plugin in Node.js)';

// The contract: a plugin.proto next to this file (when the example is
// copied out of the repository), else the repository's.
function protoFile() {
  const here = path.join(__dirname, 'plugin.proto');
  if (fs.existsSync(here)) return here;
  return path.join(__dirname, '..', '..', '..', 'plugin', 'proto', 'ferry', 'plugin', 'v1', 'plugin.proto');
}

function log(...args) {
  // Standard error reaches Ferry's log with the connector's key; standard
  // output belongs to the handshake.
  process.stderr.write(`${NAME}: ${args.join(' ')}\n`);
}

const FIELD = {STRING: 'FIELD_TYPE_STRING', INT: 'FIELD_TYPE_INT', ENUM: 'FIELD_TYPE_ENUM', DURATION: 'FIELD_TYPE_DURATION'};
const SETTINGS = [
  {name: 'path', type: FIELD.STRING, required: true, doc: 'the file whose lines are sent, one message each; it may grow',
    example_json: JSON.stringify('/tmp/in.txt')},
  {name: 'batch_size', type: FIELD.INT, default_json: '10', min: 1, max: 10000, doc: 'at most this many lines a batch'},
  {name: 'schema', type: FIELD.ENUM, values: ['json', 'text', 'raw'], default_json: '"json"', doc: 'the schema of the lines'},
  {name: 'poll_interval', type: FIELD.DURATION, default_json: '"20ms"',
    doc: 'how often the file is read again when it has nothing new'},
];

// duration reads the durations this plugin's settings take: "250ms", "1s",
// or a number of milliseconds (Ferry checked the value's form already).
function duration(v) {
  if (typeof v === 'number') return v;
  let ms = 0;
  for (const [, n, unit] of String(v).matchAll(/([\d.]+)\s*(ms|s|m|h)?/g)) {
    ms += Number(n) * ({ms: 1, s: 1000, m: 60000, h: 3600000}[unit || 'ms']);
  }
  return ms;
}

function failure(kind, reason) {
  return {kind, reason};
}

// A source reads the file from line `next` on.
class Source {
  constructor(cfg, next) {
    this.path = cfg.path;
    this.batchSize = cfg.batch_size ?? 10;
    this.schema = cfg.schema ?? 'json';
    this.interval = duration(cfg.poll_interval ?? '20ms');
    this.next = next; // lines sent so far
    this.seq = 0;
    this.pending = new Map(); // seq -> [first line, line after]
  }

  // lines are up to batchSize complete lines after the first `next`.
  lines() {
    let data;
    try {
      data = fs.readFileSync(this.path);
    } catch (e) {
      if (e.code === 'ENOENT') return [];
      throw e;
    }
    const out = [];
    let start = 0;
    for (let i = 0; out.length < this.batchSize; i++) {
      const nl = data.indexOf(0x0a, start);
      if (nl < 0) break; // none left, or a last line still being written
      if (i >= this.next) out.push(data.subarray(start, nl));
      start = nl + 1;
    }
    return out;
  }

  batch(lines) {
    const seq = ++this.seq;
    const first = this.next;
    const messages = lines.map((payload, i) => {
      const id = Buffer.alloc(16);
      id.write('node-src');
      id.writeBigUInt64BE(BigInt(first + i + 1), 8);
      return {id, payload, origin_timestamp_us: String(Date.now() * 1000)};
    });
    this.next += lines.length;
    this.pending.set(seq, [first, this.next]);
    return {seq: String(seq), schema: this.schema, messages, state: Buffer.from(String(this.next))};
  }
}

function main() {
  if (process.env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    process.stderr.write('This is a Ferry plugin (a source). Name its ferry-plugin.toml in a connector ' +
      "file's path; it is not meant to be run by hand.\n");
    process.exit(1);
  }
  const versions = (process.env.PLUGIN_PROTOCOL_VERSIONS || String(APP_PROTOCOL)).split(',').map((v) => v.trim());
  if (!versions.includes(String(APP_PROTOCOL))) {
    log(`Ferry speaks the contract's versions ${versions}; this plugin speaks ${APP_PROTOCOL}`);
    process.exit(1);
  }
  requirePackages();

  // keepCase: the proto's field names; longs as strings (seq, timestamps);
  // oneofs: a proto3 optional field (state) tells its presence in `_state`.
  const def = protoLoader.loadSync(protoFile(), {keepCase: true, longs: String, enums: String, defaults: true, oneofs: true});
  const v1 = grpc.loadPackageDefinition(def).ferry.plugin.v1;

  let source = null;

  const pluginService = {
    Spec(call, cb) {
      cb(null, {name: NAME, summary: SUMMARY, kinds: ['source'], settings: SETTINGS});
    },
  };

  const sourceService = {
    Open(call, cb) {
      const req = call.request;
      if (source) return cb({code: grpc.status.FAILED_PRECONDITION, details: 'the source is already open'});
      let cfg;
      try {
        cfg = JSON.parse(req.config_json || '{}');
      } catch (e) {
        return cb(null, {error: failure('FAILURE_KIND_PERMANENT', `config_json: ${e.message}`)});
      }
      let next = 0;
      if (req._state === 'state') { // absent on the first run
        next = Number(req.state.toString());
        if (!Number.isSafeInteger(next) || next < 0) {
          return cb(null, {error: failure('FAILURE_KIND_PERMANENT', `state ${JSON.stringify(req.state.toString())} is not a line count`)});
        }
      }
      source = new Source(cfg, next);
      log('open', req.key, 'reading', cfg.path, 'from line', next + 1);
      cb(null, {});
    },

    // Poll answers the next lines, or an empty batch after max_wait_ms.
    Poll(call, cb) {
      if (!source) return cb({code: grpc.status.FAILED_PRECONDITION, details: 'Poll before Open'});
      const src = source;
      const deadline = Date.now() + (call.request.max_wait_ms || 1000);
      const attempt = () => {
        if (src !== source || call.cancelled) return cb({code: grpc.status.CANCELLED, details: 'closed'});
        let lines;
        try {
          lines = src.lines();
        } catch (e) {
          return cb(null, {error: failure('FAILURE_KIND_RETRY', `read ${src.path}: ${e.message}`)});
        }
        if (lines.length > 0) return cb(null, {batch: src.batch(lines)});
        const left = deadline - Date.now();
        if (left <= 0) return cb(null, {batch: {}});
        setTimeout(attempt, Math.min(src.interval, left));
      };
      attempt();
    },

    // Ack: the batch is in Iggy and its state saved; nothing to do for a
    // file, but a source that must confirm (a queue) would do it here.
    Ack(call, cb) {
      if (source) source.pending.delete(Number(call.request.seq));
      cb(null, {});
    },

    // Nack: Ferry sends the same batch again itself; nothing to undo here.
    Nack(call, cb) {
      if (source) {
        const range = source.pending.get(Number(call.request.seq));
        source.pending.delete(Number(call.request.seq));
        if (range) log(`batch ${call.request.seq} (lines ${range[0] + 1}-${range[1]}) will be sent again: ${call.request.cause}`);
      }
      cb(null, {});
    },

    Close(call, cb) {
      source = null;
      cb(null, {});
    },
  };

  const server = new grpc.Server();
  server.addService(v1.Plugin.service, pluginService);
  server.addService(v1.Source.service, sourceService);
  addGoPluginServices(server, () => shutdown(server));
  listen(server, (port) => {
    // The handshake: one line on standard output, nothing before it.
    process.stdout.write(`${CORE_PROTOCOL}|${APP_PROTOCOL}|tcp|127.0.0.1:${port}|grpc\n`);
  });
  process.on('SIGTERM', () => shutdown(server));
  process.on('SIGINT', () => shutdown(server));
}

// go-plugin's own services, by hand with raw bytes (their messages are
// tiny). Ferry does not call the health service; go-plugin's client Ping
// does, so it is served. The controller's Shutdown is what go-plugin's
// client calls first when it ends a plugin: answering it and exiting at
// once spares the two seconds it waits before a kill.
const HEALTH_SERVING = Buffer.from([0x08, 0x01]); // grpc.health.v1.HealthCheckResponse{status: SERVING}

function rawMethod(servicePath) {
  const id = (b) => b;
  return {path: servicePath, requestStream: false, responseStream: false,
    requestSerialize: id, requestDeserialize: id, responseSerialize: id, responseDeserialize: id};
}

function addGoPluginServices(server, stop) {
  server.addService({Check: rawMethod('/grpc.health.v1.Health/Check')}, {
    Check(call, cb) { cb(null, HEALTH_SERVING); }, // for any service name, "plugin" included
  });
  server.addService({Shutdown: rawMethod('/plugin.GRPCController/Shutdown')}, {
    Shutdown(call, cb) {
      cb(null, Buffer.alloc(0)); // plugin.Empty
      setImmediate(stop);
    },
  });
}

function shutdown(server) {
  server.tryShutdown(() => process.exit(0));
  setTimeout(() => process.exit(0), 1000).unref();
}

// listen binds the server to a loopback port in
// PLUGIN_MIN_PORT..PLUGIN_MAX_PORT (any free port when they are not set).
function listen(server, ready) {
  const lo = Number(process.env.PLUGIN_MIN_PORT || 0);
  const hi = Number(process.env.PLUGIN_MAX_PORT || 0);
  let tries = lo > 0 && hi >= lo ? 50 : 0;
  const attempt = () => {
    const port = tries-- > 0 ? lo + Math.floor(Math.random() * (hi - lo + 1)) : 0;
    server.bindAsync(`127.0.0.1:${port}`, grpc.ServerCredentials.createInsecure(), (err, bound) => {
      if (err) {
        if (tries >= 0) return attempt();
        log(`cannot listen on 127.0.0.1: ${err.message}`);
        process.exit(1);
      }
      ready(bound);
    });
  };
  attempt();
}

main();
