"""python-sink: an example Ferry sink plugin in Python on gRPC.

It appends each consumed message's payload as a line to the file named by
the `path` setting of [plugin_config]. It implements the contract of
plugin/proto/ferry/plugin/v1/plugin.proto (the Plugin and Sink services)
and go-plugin's handshake by hand, with nothing but grpcio and protobuf
(Debian: python3-grpcio, python3-protobuf). See README.md.
"""

import json
import os
import random
import re
import signal
import sys
import threading
import time
from concurrent import futures

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen"))

import grpc  # noqa: E402

from ferry.plugin.v1 import plugin_pb2 as pb  # noqa: E402
from ferry.plugin.v1 import plugin_pb2_grpc as pb_grpc  # noqa: E402

MAGIC_COOKIE_KEY = "FERRY_PLUGIN_MAGIC_COOKIE"
MAGIC_COOKIE_VALUE = "ferry-connector-plugin"
CORE_PROTOCOL = 1  # go-plugin's
APP_PROTOCOL = 1  # the contract's: ferry.plugin.v1

NAME = "python-sink"
SUMMARY = "appends each message's payload as a line to a file (an example plugin in Python)"
SETTINGS = [
    pb.Field(name="path", type=pb.FIELD_TYPE_STRING, required=True,
             doc="the file each payload is appended to, one line each",
             example_json=json.dumps("/tmp/lines.txt")),
    pb.Field(name="fsync", type=pb.FIELD_TYPE_BOOL, default_json="false",
             doc="fsync the file after each batch, before the batch is reported written"),
    pb.Field(name="delay", type=pb.FIELD_TYPE_DURATION, default_json=json.dumps("0s"),
             doc="a pause before each message (to watch batches in flight)"),
]


def seconds(v):
    """Reads a duration setting: "250ms", "1m 30s", or a number of
    milliseconds (Ferry checked its form already)."""
    if isinstance(v, (int, float)):
        return v / 1000.0
    units = {"ns": 1e-9, "us": 1e-6, "\u00b5s": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * units[u or "ms"] for n, u in re.findall(r"([\d.]+)\s*(ns|us|\u00b5s|ms|s|m|h)?", str(v)))


def log(*args):
    # Standard error reaches Ferry's log with the connector's key; standard
    # output belongs to the handshake.
    print(NAME + ":", *args, file=sys.stderr, flush=True)


def failure(kind, reason):
    return pb.Failure(kind=kind, reason=reason)


class Plugin(pb_grpc.PluginServicer):
    def Spec(self, request, context):
        return pb.SpecResponse(name=NAME, summary=SUMMARY, kinds=["sink"], settings=SETTINGS)


class Sink(pb_grpc.SinkServicer):
    def __init__(self):
        self.lock = threading.Lock()
        self.file = None
        self.fsync = False
        self.delay = 0.0
        self.verbose = False

    def Open(self, request, context):
        # Ferry checked config_json against SETTINGS; defaults are ours to fill in.
        try:
            cfg = json.loads(request.config_json or "{}")
        except ValueError as e:
            return pb.OpenResponse(error=failure(pb.FAILURE_KIND_PERMANENT, "config_json: %s" % e))
        path = cfg.get("path")
        if not isinstance(path, str) or not path:
            return pb.OpenResponse(error=failure(pb.FAILURE_KIND_PERMANENT, "path: required"))
        with self.lock:
            if self.file is not None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "the sink is already open")
            try:
                self.file = open(path, "ab")
            except OSError as e:
                # The destination is not there (yet): Ferry retries with backoff.
                return pb.OpenResponse(error=failure(pb.FAILURE_KIND_UNAVAILABLE, "open %s: %s" % (path, e)))
            self.fsync = bool(cfg.get("fsync", False))
            self.delay = seconds(cfg.get("delay", 0))
            self.verbose = request.verbose
        log("open", request.key, "writing to", path)
        return pb.OpenResponse()

    def Consume(self, request, context):
        with self.lock:
            if self.file is None:
                context.abort(grpc.StatusCode.FAILED_PRECONDITION, "Consume before Open")
            failures = []
            out = bytearray()
            for i, m in enumerate(request.messages):
                if self.delay > 0:
                    time.sleep(self.delay)
                if b"\n" in m.payload:
                    # Can never be one line: dead-lettered by Ferry, not retried.
                    failures.append(pb.MessageFailure(index=i, kind=pb.FAILURE_KIND_PERMANENT,
                                                      reason="a payload with a newline cannot be one line"))
                    continue
                if self.verbose:
                    log("offset", m.offset, "of", request.stream, request.topic, request.partition)
                out += m.payload
                out += b"\n"
            try:
                self.file.write(out)
                self.file.flush()
                if self.fsync:
                    os.fsync(self.file.fileno())
            except OSError as e:
                # None or only some are written: Ferry delivers the batch again.
                return pb.ConsumeResponse(error=failure(pb.FAILURE_KIND_UNAVAILABLE, "write: %s" % e))
            return pb.ConsumeResponse(failures=failures)

    def Close(self, request, context):
        with self.lock:
            if self.file is not None:
                try:
                    self.file.close()
                except OSError as e:
                    return pb.CloseResponse(error=failure(pb.FAILURE_KIND_RETRY, "close: %s" % e))
                finally:
                    self.file = None
        return pb.CloseResponse()


# go-plugin's own services, by hand (no generated code: their messages are
# tiny). Ferry does not call the health service; go-plugin's client Ping
# does, so it is served. The controller's Shutdown is what go-plugin's
# client calls first when it ends a plugin: answering it and exiting at
# once spares the two seconds it waits before a kill.
HEALTH_SERVING = b"\x08\x01"  # grpc.health.v1.HealthCheckResponse{status: SERVING}


def go_plugin_services(stop):
    def check(request, context):
        return HEALTH_SERVING  # for any service name, "plugin" included

    def shutdown(request, context):
        stop.set()
        return b""  # plugin.Empty

    raw = dict(request_deserializer=None, response_serializer=None)
    return [
        grpc.method_handlers_generic_handler("grpc.health.v1.Health", {
            "Check": grpc.unary_unary_rpc_method_handler(check, **raw)}),
        grpc.method_handlers_generic_handler("plugin.GRPCController", {
            "Shutdown": grpc.unary_unary_rpc_method_handler(shutdown, **raw)}),
    ]


def listen(server):
    """Binds the server to a loopback port in PLUGIN_MIN_PORT..PLUGIN_MAX_PORT
    (any free port when they are not set) and returns the port."""
    lo = int(os.environ.get("PLUGIN_MIN_PORT") or 0)
    hi = int(os.environ.get("PLUGIN_MAX_PORT") or 0)
    candidates = []
    if 0 < lo <= hi:
        candidates = random.sample(range(lo, hi + 1), min(50, hi - lo + 1))
    for port in candidates + [0]:
        try:
            got = server.add_insecure_port("127.0.0.1:%d" % port)
        except RuntimeError:  # newer grpcio raises, older returns 0
            got = 0
        if got:
            return got
    raise SystemExit(NAME + ": cannot listen on 127.0.0.1")


def main():
    if os.environ.get(MAGIC_COOKIE_KEY) != MAGIC_COOKIE_VALUE:
        print("This is a Ferry plugin (a sink). Name its ferry-plugin.toml in a connector "
              "file's path; it is not meant to be run by hand.", file=sys.stderr)
        sys.exit(1)
    versions = [v.strip() for v in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", str(APP_PROTOCOL)).split(",")]
    if str(APP_PROTOCOL) not in versions:
        log("Ferry speaks the contract's versions %s; this plugin speaks %d" % (versions, APP_PROTOCOL))
        sys.exit(1)

    stop = threading.Event()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    pb_grpc.add_PluginServicer_to_server(Plugin(), server)
    pb_grpc.add_SinkServicer_to_server(Sink(), server)
    server.add_generic_rpc_handlers(go_plugin_services(stop))
    port = listen(server)
    server.start()

    # The handshake: one line on standard output, flushed, nothing before it.
    sys.stdout.write("%d|%d|tcp|127.0.0.1:%d|grpc\n" % (CORE_PROTOCOL, APP_PROTOCOL, port))
    sys.stdout.flush()
    sys.stdout = sys.stderr  # a stray print must not reach the handshake's pipe

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
