"""OpenTelemetry into Hone: the real OpenTelemetry SDK and its OTLP/HTTP protobuf exporter,
with each of three instrumentations of the OpenAI client (OpenInference, OpenTelemetry's GenAI
conventions in opentelemetry-instrumentation-openai-v2, OpenLLMetry), trace an application whose
client calls Hone's own chat completions. The spans arrive through /otel/v1/traces; the scenario
reads them back through /calls/stream_query, /trace/usage and the Weave SDK, and checks a raw
export's partial success.

Run by cmd/hone TestConformanceOTelPython with HONE_URL, HONE_KEY and the Weave SDK's variables
(WF_TRACE_SERVER_URL, WANDB_BASE_URL, WANDB_API_KEY). Each instrumentation runs in its own
process (they patch the client globally). The last line printed is the JSON result.
"""

import base64
import json
import os
import subprocess
import sys
import urllib.request

URL = os.environ["HONE_URL"]
KEY = os.environ["HONE_KEY"]
ENTITY = "local"

# Each instrumentation: the project it writes, and how its exporter authenticates and routes.
KINDS = {
    # key in wandb-api-key, project in the resource attributes
    "openinference": {"project": "otel-openinference", "headers": {"wandb-api-key": KEY}, "resource": True, "gzip": False},
    # Basic auth, project in the project_id header, gzip
    "openai-v2": {"project": "otel-openai-v2",
                  "headers": {"Authorization": "Basic " + base64.b64encode(f"api:{KEY}".encode()).decode(),
                              "project_id": f"{ENTITY}/otel-openai-v2"},
                  "resource": False, "gzip": True},
    # Bearer, project in the resource attributes
    "openllmetry": {"project": "otel-openllmetry", "headers": {"Authorization": f"Bearer {KEY}"}, "resource": True, "gzip": False},
}

QUESTIONS = [
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Name a colour."}],
    [{"role": "user", "content": "Name a colour."}, {"role": "assistant", "content": "Blue."}, {"role": "user", "content": "Another?"}],
]


def emit(kind: str) -> None:
    """Trace one agent turn (a root span) with two chat completions under it."""
    cfg = KINDS[kind]
    if kind == "openai-v2":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    if kind == "openllmetry":
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExportResult

    results = []

    class Recording(OTLPSpanExporter):
        def export(self, spans):
            r = super().export(spans)
            results.append((len(spans), r == SpanExportResult.SUCCESS))
            return r

    attrs = {"service.name": f"otel-{kind}"}
    if cfg["resource"]:
        attrs.update({"wandb.entity": ENTITY, "wandb.project": cfg["project"]})
    provider = TracerProvider(resource=Resource.create(attrs))
    exporter = Recording(endpoint=f"{URL}/otel/v1/traces", headers=cfg["headers"],
                         compression=Compression.Gzip if cfg["gzip"] else Compression.NoCompression)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)

    if kind == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    elif kind == "openai-v2":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=provider)

    import openai
    client = openai.OpenAI(base_url=f"{URL}/v1", api_key=KEY)
    tracer = trace.get_tracer("scenario")
    usage = {"prompt_tokens": 0, "completion_tokens": 0}
    with tracer.start_as_current_span("agent-turn", attributes={"gen_ai.conversation.id": f"thread-{kind}",
                                                                 "input": "Name two colours."}) as root:
        for msgs in QUESTIONS:
            r = client.chat.completions.create(model="demo", messages=msgs, max_tokens=8, temperature=0)
            usage["prompt_tokens"] += r.usage.prompt_tokens
            usage["completion_tokens"] += r.usage.completion_tokens
        root.set_attribute("output", "done")
        root_id = format(root.get_span_context().span_id, "016x")
        trace_id = format(root.get_span_context().trace_id, "032x")
    assert provider.force_flush(30_000), "force_flush timed out"
    provider.shutdown()
    assert results and all(ok for _, ok in results), f"exports failed: {results}"
    print(json.dumps({"root_id": root_id, "trace_id": trace_id, "usage": usage, "exported": sum(n for n, _ in results)}))


def post(path: str, body: dict) -> bytes:
    req = urllib.request.Request(URL + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Basic " + base64.b64encode(f"api:{KEY}".encode()).decode()})
    with urllib.request.urlopen(req) as resp:
        return resp.read()


def calls(project: str) -> list:
    out = post("/calls/stream_query", {"project_id": f"{ENTITY}/{project}"})
    return [json.loads(line) for line in out.decode().splitlines() if line.strip()]


def check(kind: str, emitted: dict) -> dict:
    project = KINDS[kind]["project"]
    cs = calls(project)
    assert len(cs) == 3, f"{kind}: {len(cs)} calls: {[c['op_name'] for c in cs]}"
    root = next(c for c in cs if c["id"] == emitted["root_id"])
    assert root["parent_id"] is None and root["trace_id"] == emitted["trace_id"], root
    assert root["thread_id"] == f"thread-{kind}" and root["turn_id"] == root["id"], root
    assert root["op_name"] == "agent-turn" and root["inputs"] == {"input": "Name two colours."} and root["output"] == "done", root
    chats = sorted((c for c in cs if c["id"] != root["id"]), key=lambda c: c["started_at"])
    for c, msgs in zip(chats, QUESTIONS):
        assert c["parent_id"] == root["id"] and c["trace_id"] == root["trace_id"], c
        got = c["inputs"]["messages"]
        assert [m["role"] for m in got] == [m["role"] for m in msgs], (kind, got)
        assert [m["content"] for m in got] == [m["content"] for m in msgs], (kind, got)
        choice = c["output"]["choices"][0]
        assert choice["message"]["role"] == "assistant", c["output"]
        assert c["summary"]["weave"]["status"] == "success", c["summary"]
        assert "demo" in c["summary"]["usage"], c["summary"]
        assert c["attributes"]["model"] == "demo", c["attributes"]
        assert c["wb_user_id"] == ENTITY, c
    # The root's usage is its two chat calls'.
    usage = json.loads(post("/trace/usage", {"project_id": f"{ENTITY}/{project}"}))["call_usage"][root["id"]]["demo"]
    want = emitted["usage"]
    assert usage["prompt_tokens"] == want["prompt_tokens"], (kind, usage, want)
    assert usage["completion_tokens"] == want["completion_tokens"], (kind, usage, want)
    assert usage["requests"] == 2, usage
    return {"root_id": root["id"], "chat_ids": [c["id"] for c in chats], "usage": usage,
            "studio_chat": [bool(c["inputs"]["messages"]) and all(isinstance(m.get("role"), str) for m in c["inputs"]["messages"]) for c in chats]}


def read_with_weave(kind: str, checked: dict) -> dict:
    """The same calls through the Weave SDK's client."""
    import weave
    client = weave.init(f"{ENTITY}/{KINDS[kind]['project']}")
    got = {c.id: c for c in client.get_calls()}
    assert checked["root_id"] in got and all(i in got for i in checked["chat_ids"]), list(got)
    chat = got[checked["chat_ids"][0]]
    assert chat.parent_id == checked["root_id"], chat.parent_id
    assert chat.inputs["messages"][-1]["content"] == QUESTIONS[0][-1]["content"], chat.inputs
    assert chat.output["choices"][0]["message"]["role"] == "assistant", chat.output
    assert chat.summary["usage"]["demo"]["requests"] == 1, chat.summary
    root = client.get_call(checked["root_id"])
    assert root.thread_id == f"thread-{kind}", root.thread_id
    weave.finish()
    return {"weave_calls": len(got)}


def partial_success() -> dict:
    """A raw export with one good span and one without an id: OTLP's partial success."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse
    from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
    from opentelemetry.proto.trace.v1.trace_pb2 import ResourceSpans, ScopeSpans, Span

    def kv(k, v):
        return KeyValue(key=k, value=AnyValue(string_value=v))

    good = Span(trace_id=bytes(range(1, 17)), span_id=bytes(range(1, 9)), name="raw", start_time_unix_nano=1_740_000_000_000_000_000,
                end_time_unix_nano=1_740_000_001_000_000_000)
    bad = Span(trace_id=bytes(range(1, 17)), span_id=b"", name="no id", start_time_unix_nano=1_740_000_000_000_000_000)
    req = ExportTraceServiceRequest(resource_spans=[ResourceSpans(
        resource={"attributes": [kv("wandb.entity", ENTITY), kv("wandb.project", "otel-raw")]},
        scope_spans=[ScopeSpans(spans=[good, bad])])])
    http = urllib.request.Request(URL + "/otel/v1/traces", data=req.SerializeToString(), method="POST",
                                  headers={"Content-Type": "application/x-protobuf", "wandb-api-key": KEY})
    with urllib.request.urlopen(http) as resp:
        res = ExportTraceServiceResponse.FromString(resp.read())
    assert res.partial_success.rejected_spans == 1, res
    assert "span_id" in res.partial_success.error_message, res
    assert len(calls("otel-raw")) == 1
    return {"rejected_spans": res.partial_success.rejected_spans, "error_message": res.partial_success.error_message}


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "emit":
        emit(sys.argv[2])
        return
    result = {}
    for kind in KINDS:
        out = subprocess.run([sys.executable, __file__, "emit", kind], capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            raise SystemExit(f"emit {kind} failed:\n{out.stdout}\n{out.stderr}")
        emitted = json.loads(out.stdout.strip().splitlines()[-1])
        checked = check(kind, emitted)
        checked.update(read_with_weave(kind, checked))
        checked["exported"] = emitted["exported"]
        result[kind] = checked
    result["partial_success"] = partial_success()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
