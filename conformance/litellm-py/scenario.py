"""Drives a running Hone with LiteLLM, unchanged and called as its users call it (run by
cmd/hone's TestConformanceLiteLLM): litellm.completion on the hosted_vllm provider (LiteLLM's
route for a vLLM server, which Hone's API is) and on the generic openai provider: a completion
and its stream (stream_options.include_usage, put back together with litellm.stream_chunk_builder),
acompletion, tools with tool_choice auto, required and a named function (parallel_tool_calls
off), a streamed tool call, a tool-result turn, and response_format as a Pydantic model, a
json_schema and json_object.

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"); HONE_MARK_URL, when set, is told
each case's name before it runs (GET HONE_MARK_URL/<model>/<case>). The checks are on structure
(calls of the given tools with schema-valid arguments, JSON that validates against the schema
asked for, a stream that adds up to the greedy completion), never on what the text says. Every
case runs; the last line printed is {"ok": ..., "version": ..., "cases": [{"name", "ok", "error"}]}.
"""
import asyncio
import json
import os
import sys
import time
import traceback
import urllib.request
from importlib.metadata import version
from typing import Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the cost map from GitHub
import jsonschema
import litellm
from pydantic import BaseModel

model_name = os.environ.get("HONE_MODEL", "demo")
mark_url = os.environ.get("HONE_MARK_URL")
conn = dict(api_base=os.environ["HONE_URL"] + "/v1", api_key=os.environ["HONE_KEY"], timeout=120, num_retries=0)
cases = []


def case(fn):
    """Runs one case and records whether it passed (an exception is a failure, with its text) and
    what it returned (what the model did, where that may vary: a call or text)."""
    name = fn.__name__
    if mark_url:
        urllib.request.urlopen(f"{mark_url}/{model_name}/{name}").read()
    start = time.monotonic()
    try:
        detail = fn()
        cases.append({"name": name, "ok": True, **({"detail": detail} if detail else {})})
    except Exception as e:  # a failed case is reported, the others still run
        cases.append({"name": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:1500],
                      "where": traceback.format_exc(limit=-3)[-1500:]})
    cases[-1]["seconds"] = round(time.monotonic() - start, 1)
    return fn


def check(cond, what, got=None):
    if not cond:
        raise AssertionError(f"{what}; got {got!r}"[:1500])


def complete(provider="hosted_vllm", **kw):
    args = dict(model=f"{provider}/{model_name}", messages=ASK, max_tokens=64, temperature=0, seed=1, **conn)
    args.update(kw)
    return litellm.completion(**args)


ASK = [{"role": "user", "content": "What is the weather in Paris? Use a tool."}]
HELLO = [{"role": "user", "content": "Say hello."}]
SCHEMAS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}, "required": ["city"]},
           "get_time": {"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]}}
TOOLS = [{"type": "function", "function": {"name": n, "description": f"The {n[4:]}.", "parameters": s}} for n, s in SCHEMAS.items()]


class Weather(BaseModel):
    city: Literal["Paris", "Rome"]
    sunny: bool


def check_calls(msg, names, what):
    """The message's tool calls are calls of the named tools with schema-valid arguments, and no
    call markup is left in its content."""
    calls = msg.tool_calls or []
    for c in calls:
        check(c.function.name in names and c.id and c.type == "function", f"{what}: a call of {names}", c)
        jsonschema.validate(json.loads(c.function.arguments), SCHEMAS[c.function.name])
    check("<tool_call>" not in (msg.content or ""), f"{what}: no call markup in the content", msg.content)
    return [(c.function.name, json.loads(c.function.arguments)) for c in calls]


greedy = {}


@case
def completion():
    r = complete(messages=HELLO, max_tokens=16)
    m = r.choices[0].message
    check(isinstance(m.content, str) and m.role == "assistant", "an assistant message with text", m)
    check(r.choices[0].finish_reason in ("stop", "length"), "finish reason", r.choices[0])
    u = r.usage
    check(u.completion_tokens > 0 and u.prompt_tokens + u.completion_tokens == u.total_tokens, "usage adds up", u)
    greedy["text"] = m.content


@case
def stream():
    chunks = list(complete(messages=HELLO, max_tokens=16, stream=True, stream_options={"include_usage": True}))
    whole = litellm.stream_chunk_builder(chunks, messages=HELLO)
    check(whole.choices[0].message.content == greedy.get("text"), "the chunks add up to the greedy completion's text", (whole.choices[0].message.content, greedy.get("text")))
    u = whole.usage
    check(u.completion_tokens > 0 and u.prompt_tokens + u.completion_tokens == u.total_tokens, "stream usage", u)


@case
def acompletion():
    r = asyncio.run(litellm.acompletion(model=f"hosted_vllm/{model_name}", messages=HELLO, max_tokens=16, temperature=0, seed=1, **conn))
    check(r.choices[0].message.content == greedy.get("text"), "acompletion: the greedy text", r.choices[0].message)


@case
def tools_auto():
    # Under auto the model chooses: sampled under seeds 1 to 3 until an answer has a call (the
    # random-weight demo model writes one after some text under seed 1; SmolLM2-135M mostly
    # answers in text); every answer must be valid either way.
    for seed in range(1, 4):
        r = complete(tools=TOOLS, tool_choice="auto", temperature=1, seed=seed, max_tokens=200)
        calls = check_calls(r.choices[0].message, SCHEMAS, f"auto, seed {seed}")
        if calls:
            break
    return (f"calls {[c[0] for c in calls]}" if calls else "text") + f", seed {seed}"


@case
def tools_required():
    r = complete(tools=TOOLS, tool_choice="required")
    calls = check_calls(r.choices[0].message, SCHEMAS, "required")
    check(calls, "required: at least one call", r.choices[0])
    greedy["required"] = calls


@case
def tools_named():
    r = complete(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}}, parallel_tool_calls=False)
    calls = check_calls(r.choices[0].message, {"get_time"}, "named")
    check(len(calls) == 1, "named: one call", r.choices[0])


@case
def tools_stream():
    chunks = list(complete(tools=TOOLS, tool_choice="required", stream=True))
    whole = litellm.stream_chunk_builder(chunks, messages=ASK)
    calls = check_calls(whole.choices[0].message, SCHEMAS, "streamed required")
    check(calls and calls == greedy.get("required"), "the streamed calls add up to the greedy completion's", (calls, greedy.get("required")))


@case
def tools_cut():
    # A forced call cut by max_tokens: no call markup in the content, no partial call, streamed
    # and not alike (the "leaking call markup as content").
    r = complete(tools=TOOLS, tool_choice="required", max_tokens=8)
    m = r.choices[0].message
    check(r.choices[0].finish_reason == "length" and not m.tool_calls and "<tool_call" not in (m.content or "") and "{" not in (m.content or ""),
          "cut: no call and no markup", r.choices[0])
    whole = litellm.stream_chunk_builder(list(complete(tools=TOOLS, tool_choice="required", max_tokens=8, stream=True)), messages=ASK)
    w = whole.choices[0].message
    check(not w.tool_calls and (w.content or "") == (m.content or ""), "cut, streamed: the same", w)


@case
def tool_result():
    msgs = ASK + [{"role": "assistant", "content": None, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
                  {"role": "tool", "tool_call_id": "call_1", "content": "sunny in Paris"}]
    r = complete(messages=msgs, tools=TOOLS, max_tokens=16)
    calls = check_calls(r.choices[0].message, SCHEMAS, "after a tool result")
    return f"calls {[c[0] for c in calls]}" if calls else "text"


# 160 tokens for JSON: it may have up to 8 whitespace characters between its tokens (Hone's
# default, docs/structured.md), which the random-weight demo model fills.
@case
def response_format_pydantic():
    r = complete(messages=[{"role": "user", "content": "Weather in Paris, as JSON?"}], response_format=Weather, max_tokens=160)
    Weather.model_validate_json(r.choices[0].message.content)


@case
def response_format_json_schema():
    schema = {"type": "json_schema", "json_schema": {"name": "weather", "strict": True, "schema": Weather.model_json_schema()}}
    r = complete(messages=[{"role": "user", "content": "Weather in Paris, as JSON?"}], response_format=schema, max_tokens=160)
    Weather.model_validate_json(r.choices[0].message.content)


@case
def response_format_json_object():
    # A free-form JSON object has no length bound: greedy decoding of the random-weight demo
    # model repeats one key's text to the limit, and a sampled one may too, so it is sampled
    # under seeds 1 to 4 until one ends before max_tokens.
    for seed in (1, 2, 3, 4):
        r = complete(messages=[{"role": "user", "content": "Answer with a JSON object."}], response_format={"type": "json_object"},
                     max_tokens=160, temperature=0.7, seed=seed)
        if r.choices[0].finish_reason != "length":
            break
    check(r.choices[0].finish_reason == "stop" and isinstance(json.loads(r.choices[0].message.content), dict), "a JSON object", r.choices[0])
    return f"seed {seed}"


@case
def openai_provider_tools():
    # The generic OpenAI-compatible provider: the same required call.
    r = complete(provider="openai", tools=TOOLS, tool_choice="required")
    calls = check_calls(r.choices[0].message, SCHEMAS, "openai/ required")
    check(calls == greedy.get("required"), "openai/: the same call as hosted_vllm/", (calls, greedy.get("required")))


@case
def openai_provider_response_format():
    r = complete(provider="openai", messages=[{"role": "user", "content": "Weather in Paris, as JSON?"}], response_format=Weather, max_tokens=160)
    Weather.model_validate_json(r.choices[0].message.content)


print(json.dumps({"ok": all(c["ok"] for c in cases), "version": version("litellm"), "model": model_name, "cases": cases}))
sys.stdout.flush()
