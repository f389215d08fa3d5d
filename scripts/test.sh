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

# RabbitMQ for the rabbitmq connector's tests: installed from Debian's
# packages when missing and started now, in the background (it takes
# about 10 s), as its own user on loopback ports with its data in a temp
# dir; waited for below, after PostgreSQL. Tests read FERRY_TEST_AMQP_URL;
# FERRY_REQUIRE_RABBITMQ=1 makes them fail rather than skip without it.
RMQ_SERVER=$(command -v rabbitmq-server || true)
[ -n "$RMQ_SERVER" ] || [ ! -x /usr/lib/rabbitmq/bin/rabbitmq-server ] || RMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server
if [ -z "$RMQ_SERVER" ]; then
  echo "== installing RabbitMQ (apt-get install rabbitmq-server)"
  apt_install rabbitmq-server
  RMQ_SERVER=/usr/lib/rabbitmq/bin/rabbitmq-server
fi
RMQ_DIR=$(mktemp -d /tmp/ferry-rabbitmq.XXXXXX)
RMQ_PORT=$((20000 + RANDOM % 30000))
RMQ_DIST=$((RMQ_PORT + 1))
chmod 755 "$RMQ_DIR"
cat > "$RMQ_DIR/rabbitmq.conf" <<CONF
listeners.tcp.default = 127.0.0.1:$RMQ_PORT
loopback_users = none
log.console = false
log.file.level = warning
max_message_size = 1048576
CONF
RMQ_AS=()
if [ "$(id -u)" -eq 0 ] && id rabbitmq >/dev/null 2>&1; then
  chown -R rabbitmq: "$RMQ_DIR"; RMQ_AS=(runuser -u rabbitmq --)
fi
# setsid: the server, Erlang and their children form one process group,
# killed together at exit.
setsid "${RMQ_AS[@]}" env HOME="$RMQ_DIR" RABBITMQ_NODENAME="ferryci$RMQ_PORT@localhost" RABBITMQ_NODE_IP_ADDRESS=127.0.0.1 \
  RABBITMQ_DIST_PORT="$RMQ_DIST" RABBITMQ_MNESIA_BASE="$RMQ_DIR/mnesia" RABBITMQ_LOG_BASE="$RMQ_DIR/log" \
  RABBITMQ_CONFIG_FILE="$RMQ_DIR/rabbitmq.conf" RABBITMQ_ENABLED_PLUGINS_FILE="$RMQ_DIR/enabled_plugins" \
  ERL_EPMD_ADDRESS=127.0.0.1 "$RMQ_SERVER" >"$RMQ_DIR/server.out" 2>&1 &
RMQ_PID=$!
disown "$RMQ_PID" # killed at exit without a job report

# ClickHouse for the clickhouse sink's tests (Debian's clickhouse-server),
# on loopback ports with its data in a temp dir, as its own user; it
# answers in about a second. Tests read FERRY_TEST_CLICKHOUSE_URL.
CH_SERVER=$(command -v clickhouse-server || true)
[ -n "$CH_SERVER" ] || [ ! -x /usr/sbin/clickhouse-server ] || CH_SERVER=/usr/sbin/clickhouse-server
if [ -z "$CH_SERVER" ]; then
  echo "== installing ClickHouse (apt-get install clickhouse-server)"
  apt_install clickhouse-server
  CH_SERVER=/usr/sbin/clickhouse-server
fi
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
if [ ! -d examples/plugins/node-source/node_modules ]; then
  echo "== npm ci (examples/plugins/node-source)"
  npm ci --prefix examples/plugins/node-source --no-audit --no-fund --loglevel=error
fi
export FERRY_REQUIRE_PLUGIN_RUNTIMES=1

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
  kill -KILL -- "-$RMQ_PID" 2>/dev/null || kill -KILL "$RMQ_PID" 2>/dev/null || true
  rm -rf "$RMQ_DIR"
  if [ -n "${CH_PID:-}" ]; then kill -KILL -- "-$CH_PID" 2>/dev/null || kill -KILL "$CH_PID" 2>/dev/null || true; fi
  rm -rf "${CH_DIR:-}"
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

CH_DIR=$(mktemp -d /tmp/ferry-clickhouse.XXXXXX)
CH_PORT=$((20000 + RANDOM % 30000))
go run ./internal/chtest/cmd/chconfig "$CH_DIR" "$CH_PORT" "$((CH_PORT + 1))"
CH_AS=()
if [ "$(id -u)" -eq 0 ] && id clickhouse >/dev/null 2>&1; then
  chown -R clickhouse: "$CH_DIR"; chmod 755 "$CH_DIR"; CH_AS=(runuser -u clickhouse --)
fi
setsid "${CH_AS[@]}" "$CH_SERVER" --config-file="$CH_DIR/config.xml" >"$CH_DIR/server.out" 2>&1 &
CH_PID=$!
disown "$CH_PID"
for _ in $(seq 1 300); do
  (echo > "/dev/tcp/127.0.0.1/$CH_PORT") 2>/dev/null && break
  kill -0 "$CH_PID" 2>/dev/null || { echo "ClickHouse exited at start:"; tail -n 20 "$CH_DIR/log/error.log" "$CH_DIR/server.out"; exit 1; }
  sleep 0.2
done
(echo > "/dev/tcp/127.0.0.1/$CH_PORT") 2>/dev/null || { echo "ClickHouse did not listen on $CH_PORT"; exit 1; }
export FERRY_TEST_CLICKHOUSE_URL="http://127.0.0.1:$CH_PORT"
export FERRY_REQUIRE_CLICKHOUSE=1
echo "== ClickHouse $(dpkg-query -W -f='${Version}' clickhouse-server 2>/dev/null || echo '?') on 127.0.0.1:$CH_PORT ($CH_DIR)"

for _ in $(seq 1 300); do
  (echo > "/dev/tcp/127.0.0.1/$RMQ_PORT") 2>/dev/null && break
  kill -0 "$RMQ_PID" 2>/dev/null || { echo "RabbitMQ exited at start:"; tail -n 20 "$RMQ_DIR/server.out"; exit 1; }
  sleep 0.3
done
(echo > "/dev/tcp/127.0.0.1/$RMQ_PORT") 2>/dev/null || { echo "RabbitMQ did not listen on $RMQ_PORT:"; tail -n 20 "$RMQ_DIR/server.out"; exit 1; }
export FERRY_TEST_AMQP_URL="amqp://guest:guest@127.0.0.1:$RMQ_PORT/"
export FERRY_REQUIRE_RABBITMQ=1
echo "== RabbitMQ $(dpkg-query -W -f='${Version}' rabbitmq-server 2>/dev/null || echo '?') on 127.0.0.1:$RMQ_PORT ($RMQ_DIR)"

echo "== go vet"
go vet ./...

echo "== go test -race"
# -json through scripts/testsum: the usual output, then one line
# "N passed, N failed, N skipped"; the pipe fails when a test does.
go build -o "$PG_DIR/testsum" ./scripts/testsum
go test -race -json -timeout 20m "$@" ./... 2>&1 | "$PG_DIR/testsum"
