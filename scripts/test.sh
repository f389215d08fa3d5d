#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs and starts what the
# tests need, then runs gofmt, go vet and go test -race on every package.
# Usage: ./scripts/test.sh [extra go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

echo "== go $(go version | awk '{print $3}')"

as_root() { if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi; }
apt_install() {
  if [ -z "${APT_UPDATED:-}" ]; then
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    APT_UPDATED=1
  fi
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "$@"
}

# go test -race needs cgo, so a C compiler.
if ! command -v gcc >/dev/null 2>&1 && ! command -v cc >/dev/null 2>&1; then
  echo "== installing a C compiler for -race (apt-get install gcc libc6-dev)"
  apt_install gcc libc6-dev
fi
# git: the tests of the first hour check that a run leaves a checkout clean.
command -v git >/dev/null 2>&1 || { echo "== installing git"; apt_install git; }

# Servers the connector tests use, from Debian's packages when missing;
# started below by internal/servertest/cmd/testservers (the code the tests
# use to start their own), in parallel, on loopback ports with their data in
# temp dirs, while PostgreSQL starts. Each sets FERRY_TEST_<KIND>_URL and
# FERRY_REQUIRE_<KIND>=1 (tests fail rather than skip without it).
SERVERS=(rabbitmq clickhouse)
# Servers written in Go, built from the Go module proxy once per version
# (about a minute each on 2 cores) into a cache of their own, in the
# background while the rest is installed; their paths go to the tests in
# FERRY_<NAME>_SERVER.
SRV_CACHE="${FERRY_SERVER_CACHE:-$(go env GOPATH)/ferry-test-servers}"
go_server() { # go_server NAME MODULE/cmd/BIN@VERSION
  local name=$1 pkg=$2 bin dir
  bin=$(basename "${pkg%@*}"); dir="$SRV_CACHE/$bin-${pkg##*@}"
  export "FERRY_${name}_SERVER=$dir/$bin"
  [ -x "$dir/$bin" ] && return 0
  echo "== building $bin (go install $pkg)"
  mkdir -p "$dir"
  ( GOBIN="$dir.tmp" GOFLAGS=-buildvcs=false go install "$pkg" >"$dir.log" 2>&1 && mv "$dir.tmp/$bin" "$dir/$bin" && rm -rf "$dir.tmp" ) &
  GO_SERVER_BUILDS+=($!)
}
GO_SERVER_BUILDS=()
# FerretDB's main wants build/version/version.txt, which its module zip
# lacks: build it from a copy of the module with that file written.
ferretdb_server() { # ferretdb_server VERSION
  local v=$1 dir="$SRV_CACHE/ferretdb-$1"
  export FERRY_FERRETDB_SERVER="$dir/ferretdb"
  [ -x "$dir/ferretdb" ] && return 0
  echo "== building ferretdb $v (from the Go module proxy, with its version file)"
  mkdir -p "$dir"
  ( set -e
    src=$(cd "$SRV_DIR_BUILD" && go mod download -json "github.com/FerretDB/FerretDB@$v" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    cp -r "$src" "$dir.src" && chmod -R u+w "$dir.src"
    echo "$v" > "$dir.src/build/version/version.txt"
    cd "$dir.src" && GOFLAGS=-buildvcs=false go build -o "$dir.tmp" ./cmd/ferretdb
    mv "$dir.tmp" "$dir/ferretdb"; rm -rf "$dir.src"
  ) >"$dir.log" 2>&1 &
  GO_SERVER_BUILDS+=($!)
}
# The OpenTelemetry Collector of package telemetry's tests (otlp receiver,
# file exporter): a module of its own in internal/servertest/otelcol,
# outside the main one, at collector v0.161.0 / contrib v0.161.0; built
# with go build in its directory, cached by version and by a hash of its
# files (a change to them builds it again).
otelcol_server() { # otelcol_server VERSION
  local src=internal/servertest/otelcol sum dir
  sum=$(cat "$src/go.mod" "$src/go.sum" "$src"/*.go | sha256sum | cut -c1-12)
  dir="$SRV_CACHE/ferry-otelcol-$1-$sum"
  export FERRY_OTELCOL_SERVER="$dir/ferry-otelcol" FERRY_REQUIRE_OTELCOL=1
  [ -x "$dir/ferry-otelcol" ] && return 0
  echo "== building ferry-otelcol $1 (go build in $src)"
  mkdir -p "$dir"
  ( cd "$src" && GOFLAGS=-buildvcs=false go build -o "$dir.tmp" . && mv "$dir.tmp" "$dir/ferry-otelcol" ) >"$dir.log" 2>&1 &
  GO_SERVER_BUILDS+=($!)
}
SRV_DIR_BUILD=$(mktemp -d /tmp/ferry-srvbuild.XXXXXX)
go_server VERSITYGW github.com/versity/versitygw/cmd/versitygw@v1.8.0; SERVERS+=(s3)
go_server INFLUXD github.com/influxdata/influxdb/cmd/influxd@v1.8.10; SERVERS+=(influxdb)
ferretdb_server v1.24.2; SERVERS+=(mongodb)
otelcol_server v0.161.0
if ! command -v rabbitmq-server >/dev/null 2>&1 && [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ]; then
  echo "== installing RabbitMQ (apt-get install rabbitmq-server)"
  apt_install rabbitmq-server
fi
if ! command -v clickhouse-server >/dev/null 2>&1 && [ ! -x /usr/sbin/clickhouse-server ]; then
  echo "== installing ClickHouse (apt-get install clickhouse-server)"
  apt_install clickhouse-server
fi
# Redis, NATS (JetStream), mosquitto and MariaDB for issue 15's connectors.
missing=()
command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing+=(redis-server)
command -v nats-server >/dev/null 2>&1 || [ -x /usr/sbin/nats-server ] || missing+=(nats-server)
command -v mosquitto >/dev/null 2>&1 || [ -x /usr/sbin/mosquitto ] || missing+=(mosquitto)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || missing+=(mariadb-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]} (apt-get install)"
  apt_install "${missing[@]}"
fi
SERVERS+=(redis nats mqtt mysql)
for pid in "${GO_SERVER_BUILDS[@]}"; do
  wait "$pid" || { echo "building a test server failed:"; tail -n 20 "$SRV_CACHE"/*.log; exit 1; }
done
SRV_DIR=$(mktemp -d /tmp/ferry-servers.XXXXXX)
go build -o "$SRV_DIR/testservers" ./internal/servertest/cmd/testservers
( "$SRV_DIR/testservers" -env "$SRV_DIR/env" "${SERVERS[@]}" 2>"$SRV_DIR/err"; echo $? > "$SRV_DIR/rc" ) &
SRV_PID=$!

# Plugin examples: Python (Debian's grpcio and protobuf) and Node.js
# (@grpc/grpc-js from the npm registry, pinned by the example's lockfile).
if ! /usr/bin/python3 -c 'import grpc, google.protobuf' >/dev/null 2>&1; then
  echo "== installing python3-grpcio python3-protobuf for the Python plugin example"
  apt_install python3 python3-grpcio python3-protobuf
fi
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing nodejs npm for the Node.js plugin example"
  apt_install nodejs npm
fi
command -v jq >/dev/null 2>&1 || { echo "== installing jq for the shell plugin examples"; apt_install jq; }
# Debian's Chromium, for the web console's browser test (chromedp drives it).
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  echo "== installing chromium for the web console's browser test (apt-get install chromium)"
  apt_install chromium
fi
export FERRY_CHROMIUM=/usr/bin/chromium FERRY_REQUIRE_CHROMIUM=1
if [ ! -d examples/plugins/node-source/node_modules ]; then
  echo "== npm ci (examples/plugins/node-source)"
  npm ci --prefix examples/plugins/node-source --no-audit --no-fund --loglevel=error
fi
export FERRY_REQUIRE_PLUGIN_RUNTIMES=1
# The AsyncAPI parser for eventtypes' document test: @asyncapi/parser and
# its Avro and Protobuf schema parsers from the npm registry, versions
# pinned, installed once into the server cache (a directory per set of
# versions; the next runs only check that it is there).
ASYNCAPI_PKGS=(@asyncapi/parser@3.6.6 @asyncapi/avro-schema-parser@3.1.0 @asyncapi/protobuf-schema-parser@3.9.0)
ASYNCAPI_DIR="$SRV_CACHE/asyncapi-parser-3.6.6-avro-3.1.0-protobuf-3.9.0"
if [ ! -f "$ASYNCAPI_DIR/node_modules/@asyncapi/parser/package.json" ]; then
  echo "== npm install ${ASYNCAPI_PKGS[*]} (into $ASYNCAPI_DIR)"
  rm -rf "$ASYNCAPI_DIR.tmp" && mkdir -p "$ASYNCAPI_DIR.tmp"
  echo '{"private": true}' > "$ASYNCAPI_DIR.tmp/package.json"
  npm install --prefix "$ASYNCAPI_DIR.tmp" --no-audit --no-fund --loglevel=error "${ASYNCAPI_PKGS[@]}"
  rm -rf "$ASYNCAPI_DIR" && mv "$ASYNCAPI_DIR.tmp" "$ASYNCAPI_DIR"
fi
export FERRY_ASYNCAPI_PARSER_DIR="$ASYNCAPI_DIR" FERRY_REQUIRE_ASYNCAPI=1

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

# PostgreSQL for the postgres connector's tests: installed from Debian's
# packages when missing, and a throwaway cluster (logical replication on,
# loopback port, socket in a temp dir) that lives as long as this script.
# Tests read its DSN from FERRY_TEST_POSTGRES_DSN; FERRY_REQUIRE_POSTGRES=1
# makes them fail rather than skip when PostgreSQL is unavailable.
pg_bin() {
  if command -v initdb >/dev/null 2>&1; then dirname "$(readlink -f "$(command -v initdb)")"; return; fi
  ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n | while read -r d; do
    [ -x "$d/initdb" ] && echo "$d"
  done | tail -n 1
}
# initdb refuses to run as root: run the server as the postgres user then.
as_pg() {
  if [ "$(id -u)" -ne 0 ]; then "$@"
  elif command -v runuser >/dev/null 2>&1; then runuser -u postgres -- "$@"
  else su -s /bin/sh postgres -c "$(printf '%q ' "$@")"
  fi
}
PG_BIN=$(pg_bin)
if [ -z "$PG_BIN" ]; then
  echo "== installing PostgreSQL (apt-get install postgresql)"
  apt_install postgresql
  PG_BIN=$(pg_bin)
  [ -n "$PG_BIN" ] || { echo "PostgreSQL was installed but initdb was not found"; exit 1; }
fi
PG_DIR=$(mktemp -d /tmp/ferry-pg.XXXXXX)
stop_pg() {
  as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -m immediate -w stop >/dev/null 2>&1 || true
  rm -rf "$PG_DIR"
}
stop_servers() {
  stop_pg
  pkill -TERM -P "$SRV_PID" 2>/dev/null || true
  for _ in $(seq 1 100); do [ -e "$SRV_DIR/rc" ] && break; sleep 0.1; done
  rm -rf "$SRV_DIR"
}
trap stop_servers EXIT
chmod 755 "$PG_DIR"
[ "$(id -u)" -ne 0 ] || chown postgres: "$PG_DIR"
as_pg "$PG_BIN/initdb" -D "$PG_DIR/data" -U postgres -A trust -E UTF8 --locale=C --no-sync >"$PG_DIR/initdb.log"
as_pg sh -c "cat > '$PG_DIR/data/pg_hba.conf'" <<'HBA'
local all all trust
local replication all trust
host all postgres 127.0.0.1/32 trust
host replication postgres 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
host replication all 127.0.0.1/32 scram-sha-256
HBA
PG_PORT=""
for _ in 1 2 3 4 5; do
  port=$((20000 + RANDOM % 30000))
  as_pg sh -c "cat >> '$PG_DIR/data/postgresql.conf'" <<CONF
listen_addresses = '127.0.0.1'
port = $port
unix_socket_directories = '$PG_DIR'
wal_level = logical
max_replication_slots = 64
max_wal_senders = 64
max_connections = 300
fsync = off
full_page_writes = off
CONF
  if as_pg "$PG_BIN/pg_ctl" -D "$PG_DIR/data" -l "$PG_DIR/server.log" -w -t 60 start >/dev/null; then
    PG_PORT=$port; break
  fi
  echo "   (port $port: $(tail -n 1 "$PG_DIR/server.log" 2>/dev/null); trying another)"
done
[ -n "$PG_PORT" ] || { echo "PostgreSQL did not start:"; tail -n 20 "$PG_DIR/server.log"; exit 1; }
export FERRY_TEST_POSTGRES_DSN="postgres://postgres@127.0.0.1:$PG_PORT/postgres?sslmode=disable"
export FERRY_REQUIRE_POSTGRES=1
echo "== PostgreSQL $("$PG_BIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT ($PG_DIR)"

for _ in $(seq 1 1200); do [ -e "$SRV_DIR/env" ] || [ -e "$SRV_DIR/rc" ] && break; sleep 0.1; done
if [ ! -e "$SRV_DIR/env" ]; then
  echo "servers did not start:"; cat "$SRV_DIR/err"; exit 1
fi
. "$SRV_DIR/env"
echo "== servers: $(grep -o 'FERRY_TEST_[A-Z0-9_]*=[^ ]*' "$SRV_DIR/env" | tr -d "'" | tr '\n' ' ')"

echo "== go vet"
go vet ./...

echo "== go test -race"
# -json through scripts/testsum: the usual output, then one line
# "N passed, N failed, N skipped"; the pipe fails when a test does.
go build -o "$PG_DIR/testsum" ./scripts/testsum
go test -race -json -timeout 20m "$@" ./... 2>&1 | "$PG_DIR/testsum"
