#!/usr/bin/env bash
# Runs every test of Hone: installs what the tests need (npm clients for the conformance
# tests), then runs `go vet ./...` and `go test ./...`.
set -euo pipefail
cd "$(dirname "$0")/.."
go vet ./...
go test -count=1 ./...
