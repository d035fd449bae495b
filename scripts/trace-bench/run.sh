#!/usr/bin/env bash
# Runs Hone's trace-store benchmarks and, in the same run, the same workloads on Weave's own
# SQLite trace server (weave 0.51.59, the last release that ships it), then prints both.
# Usage: scripts/trace-bench/run.sh            (needs Go; Python 3 for the Weave side)
set -euo pipefail
cd "$(dirname "$0")/../.."
VENV=${WEAVE_SQLITE_VENV:-/tmp/hone-weave-sqlite-venv}
echo "== Hone (HTTP, SQLite file) =="
go test -run xxx -bench 'Ingest|TraceUsage|TableQuery|ObjsQuery' -benchtime 5x -timeout 60m ./internal/traceapi/ | grep -E 'Benchmark'
if command -v python3 >/dev/null; then
  if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q weave==0.51.59 emoji
  fi
  echo "== Weave SQLite trace server (in process, no HTTP) =="
  REPEAT=${REPEAT:-3} "$VENV/bin/python" scripts/trace-bench/weave_sqlite_bench.py
fi
