#!/usr/bin/env bash
# Runs every test of Hone (`make test`): installs and starts what the tests need
# (scripts/test-setup.sh: PostgreSQL, npm clients for the conformance tests), then runs
# `go vet ./...` and `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."
eval "$(scripts/test-setup.sh)"
go vet ./...
go test -count=1 -timeout 45m ./...
