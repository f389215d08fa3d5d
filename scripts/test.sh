#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs and starts what the
# tests need, then runs gofmt, go vet and go test -race on every package.
# Usage: ./scripts/test.sh [extra go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

echo "== go $(go version | awk '{print $3}')"

unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

echo "== go test -race"
go test -race -timeout 20m "$@" ./...
