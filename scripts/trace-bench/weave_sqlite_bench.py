"""Times Weave's own SQLite trace server (weave 0.51.59, the last release that ships it) on
the same data as Hone's trace benchmarks (internal/trace/bench_test.go), in process, and prints
one JSON object of medians. Run by scripts/trace-bench/run.sh; needs `pip install weave==0.51.59
emoji`.
"""
import datetime
import json
import os
import random
import statistics
import sys
import tempfile
import time

from weave.trace_server import trace_server_interface as tsi
from weave.trace_server.sqlite_trace_server import SqliteTraceServer

REPEAT = int(os.environ.get("REPEAT", "3"))
PROJECT = "cHJvamVjdA=="  # an internal (base64) project id, as Weave's servers store them


def server():
    d = tempfile.mkdtemp()
    s = SqliteTraceServer(os.path.join(d, "weave.db"))
    s.setup_tables()
    return s


def call_batch(trace, first, n, shape):
    t0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.timezone.utc)
    items = []
    for i in range(first, first + n):
        parent = None
        if i > 0:
            parent = f"{trace}-{(i - 1) // 100 if shape == 'wide' else i - 1}"
        at = t0 + datetime.timedelta(milliseconds=i)
        items.append(tsi.CallBatchStartMode(req=tsi.CallStartReq(start=tsi.StartedCallSchemaForInsert(
            project_id=PROJECT, id=f"{trace}-{i}", trace_id=trace, parent_id=parent,
            op_name=f"weave-trace-internal:///{PROJECT}/op/llm:abc", started_at=at, attributes={},
            inputs={"prompt": f"question {i}", "temperature": 0.7}))))
        items.append(tsi.CallBatchEndMode(req=tsi.CallEndReq(end=tsi.EndedCallSchemaForInsert(
            project_id=PROJECT, id=f"{trace}-{i}", ended_at=at, output={"text": f"answer {i}"},
            summary={"usage": {"gpt-4o": {"prompt_tokens": 10 + i % 7, "completion_tokens": 5 + i % 3, "requests": 1}}}))))
    return tsi.CallCreateBatchReq(batch=items)


def ingest():
    s = server()
    batches = [call_batch("tr", i * 1000, 1000, "chain") for i in range(100)]
    t = time.perf_counter()
    for b in batches:
        s.call_start_batch(b)
    return 100000 / (time.perf_counter() - t)


def usage_calls_query(shape):
    # Weave's SQLite server has no /trace/usage: time what the roll-up must read, the calls of
    # the trace (calls_query over 10,000 calls with their summaries).
    s = server()
    for i in range(0, 10000, 1000):
        s.call_start_batch(call_batch(shape, i, 1000, shape))
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        res = s.calls_query(tsi.CallsQueryReq(project_id=PROJECT, filter=tsi.CallsFilter(trace_ids=[shape]),
                                              columns=["id", "parent_id", "summary", "ended_at"]))
        times.append((time.perf_counter() - t) * 1000)
        assert len(res.calls) == 10000
    return statistics.median(times)


def table_pages():
    s = server()
    rng = random.Random(1)
    rows = [{"input": {"question": f"q{i}", "score": rng.randrange(1000000)}, "expected": f"a{i}"} for i in range(100000)]
    digest = s.table_create(tsi.TableCreateReq(table=tsi.TableSchemaForInsert(project_id=PROJECT, rows=rows))).digest
    out = {}
    for name, sort in (("unsorted", None), ("sorted_dotted", [tsi.SortBy(field="input.score", direction="desc")])):
        times = []
        for _ in range(REPEAT * 3):
            off = rng.randrange(99900)
            t = time.perf_counter()
            res = s.table_query(tsi.TableQueryReq(project_id=PROJECT, digest=digest, limit=100, offset=off, sort_by=sort))
            times.append((time.perf_counter() - t) * 1000)
            assert len(res.rows) == 100
        out[name] = statistics.median(times)
    return out


def objs_latest():
    s = server()
    for v in range(10):
        for o in range(10000):
            s.obj_create(tsi.ObjCreateReq(obj=tsi.ObjSchemaForInsert(project_id=PROJECT, object_id=f"obj{o}", val={
                "_type": "Model", "_class_name": "M", "_bases": ["Model", "Object", "BaseModel"],
                "version": v, "params": {"lr": 0.001, "layers": o % 12}})))
    times = []
    for _ in range(REPEAT):
        t = time.perf_counter()
        res = s.objs_query(tsi.ObjQueryReq(project_id=PROJECT, filter=tsi.ObjectVersionFilter(latest_only=True)))
        times.append((time.perf_counter() - t) * 1000)
        assert len(res.objs) == 10000
    return statistics.median(times)


if __name__ == "__main__":
    which = sys.argv[1:] or ["ingest", "usage", "table", "objs"]
    result = {}
    if "ingest" in which:
        result["ingest_calls_per_s"] = statistics.median(ingest() for _ in range(REPEAT))
    if "usage" in which:
        result["usage_read_chain_ms"] = usage_calls_query("chain")
        result["usage_read_wide_ms"] = usage_calls_query("wide")
    if "table" in which:
        pages = table_pages()
        result["table_page_unsorted_ms"] = pages["unsorted"]
        result["table_page_sorted_ms"] = pages["sorted_dotted"]
    if "objs" in which:
        result["objs_latest_ms"] = objs_latest()
    print(json.dumps(result))
