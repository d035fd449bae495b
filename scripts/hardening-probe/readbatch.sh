#!/usr/bin/env bash
# The issue 33 item 1 probe: one object of 256 KiB, then CONC concurrent /refs/read_batch
# requests of about 10 KB, each {"refs": [that ref x 100]}, from KEYS API keys (1: all from the
# initial key); with OBJECTS=100 in the environment, 100 objects of 256 KiB and each request
# names every one of them once (no ref repeated). Reports the answers' statuses, the server's
# peak RSS (sampled every 20 ms from /proc) and its RSS 1, 3, 5 and 10 s after the burst, with
# the anonymous part (RssAnon: the heap; the rest is SQLite's memory-mapped database file).
#
#   scripts/hardening-probe/readbatch.sh BIN [DSN] [CONC] [KEYS] [-- extra serve flags]
#
# DSN: a postgres:// URL (a fresh schema is made in it and dropped after), or empty for SQLite.
# Example (the figures in docs/reliability.md):
#   go build -o /tmp/hone-33 ./cmd/hone
#   scripts/hardening-probe/readbatch.sh /tmp/hone-33 "" 128 1
#   scripts/hardening-probe/readbatch.sh /tmp/hone-33 "$HONE_TEST_POSTGRES_DSN" 128 128
set -euo pipefail
bin=$1 dsn=${2:-} conc=${3:-128} keys=${4:-1}
shift $(( $# < 4 ? $# : 4 ))
[ "${1:-}" = "--" ] && shift
data=$(mktemp -d)
port=$(( 20000 + RANDOM % 20000 ))
PSQL=$(ls /usr/lib/postgresql/*/bin/psql 2>/dev/null | sort -V | tail -n 1 || true)
args=()
schema=""
if [ -n "$dsn" ]; then
  schema="probe_$RANDOM$RANDOM"
  "$PSQL" "$dsn" -qc "CREATE SCHEMA $schema"
  sep='?'; [[ "$dsn" == *\?* ]] && sep='&'
  args=(--db "${dsn}${sep}search_path=$schema")
fi
"$bin" serve --data "$data" --addr "127.0.0.1:$port" --train-workers 0 --max-concurrent-per-key 0 --log-level error "${args[@]}" "$@" >"$data/out" 2>"$data/err" &
pid=$!
cleanup() {
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ -n "$schema" ] && PGOPTIONS='--client-min-messages=warning' "$PSQL" "$dsn" -qc "DROP SCHEMA $schema CASCADE" || true
  rm -rf "$data"
}
trap cleanup EXIT
for _ in $(seq 600); do grep -q listening "$data/out" 2>/dev/null && break; sleep 0.2; done
grep -q listening "$data/out" || { cat "$data/err"; exit 1; }
cp "$data/initial-api-key" "$data/keys"
for _ in $(seq 2 "$keys"); do "$bin" keys create --data "$data" --entity local "${args[@]}" 2>/dev/null | tail -n 1 >>"$data/keys"; done
rss() { awk -v k="$1:" '$1==k{printf "%.0f MiB", $2/1024}' "/proc/$pid/status"; }
echo "idle: RSS $(rss VmRSS) (anonymous $(rss RssAnon))"
python3 - "http://127.0.0.1:$port" "$data/keys" "$conc" "$pid" "${OBJECTS:-1}" <<'PY'
import base64, json, sys, threading, time, urllib.request, collections
url, keyfile, conc, pid, nobj = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5])
keys = [k.strip() for k in open(keyfile) if k.strip()]
def post(path, body, key):
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(b"api:" + key.encode()).decode()})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
refs = []
for i in range(nobj):
    code, b = post("/obj/create", {"obj": {"project_id": "local/probe", "object_id": "big%d" % i, "val": {"v": chr(65 + i % 26) * (256 << 10), "i": i}}}, keys[0])
    assert code == 200, (code, b[:200])
    refs.append("weave:///local/probe/object/big%d:%s" % (i, json.loads(b)["digest"]))
body = {"refs": (refs * 100)[:100]}
print("request body: %d bytes" % len(json.dumps(body)))
def rss(field="VmRSS:"):
    for l in open("/proc/%s/status" % pid):
        if l.startswith(field):
            return int(l.split()[1]) // 1024
peak, stop = [0], [False]
def sample():
    while not stop[0]:
        peak[0] = max(peak[0], rss()); time.sleep(0.02)
st = threading.Thread(target=sample); st.start()
codes = collections.Counter()
lock = threading.Lock()
def one(i):
    c, _ = post("/refs/read_batch", body, keys[i % len(keys)])
    with lock: codes[c] += 1
t0 = time.time()
ts = [threading.Thread(target=one, args=(i,)) for i in range(conc)]
for t in ts: t.start()
for t in ts: t.join()
t1 = time.time()
stop[0] = True; st.join()
print("%d requests from %d key(s) in %.1f s: statuses %s; peak RSS %d MiB" % (conc, len(keys), t1 - t0, dict(sorted(codes.items())), peak[0]))
for after in (1, 3, 5, 10):
    time.sleep(after - (time.time() - t1))
    print("  %2d s after: RSS %d MiB (anonymous %d MiB)" % (after, rss(), rss("RssAnon:")))
PY
