"""Drives a running Hone with LangChain's ChatOpenAI (langchain-openai), unchanged and called as
its users call it (run by cmd/hone's TestConformanceLangChain): invoke, stream (with usage),
tools bound with tool_choice auto, required ("any") and a named tool, a streamed tool call, a
tool-result turn, and with_structured_output in its three methods (json_schema, function_calling
strict and not, json_mode), and the Responses API (use_responses_api).

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"); HONE_MARK_URL, when set, is told
each case's name before it runs (GET HONE_MARK_URL/<model>/<case>) so the test can attribute the
requests it sees. The checks are on structure (a call of a bound tool whose arguments validate
against the tool's schema, a structured object validated by LangChain's own parser, a stream
that adds up to the greedy answer), never on what the text says. Every case runs; the last line
printed is {"ok": ..., "version": ..., "cases": [{"name", "ok", "error"}, ...]}.
"""
import json
import os
import sys
import time
import traceback
import urllib.request
from typing import Literal

import jsonschema
import openai
from importlib.metadata import version
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_openai import ChatOpenAI
from pydantic import BaseModel

model = os.environ.get("HONE_MODEL", "demo")
mark_url = os.environ.get("HONE_MARK_URL")
cases = []


def case(fn):
    """Runs one case and records whether it passed (an exception is a failure, with its text) and
    what it returned (what the model did, where that may vary: a call or text)."""
    name = fn.__name__
    if mark_url:
        urllib.request.urlopen(f"{mark_url}/{model}/{name}").read()
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


def llm(**kw):
    args = dict(model=model, base_url=os.environ["HONE_URL"] + "/v1", api_key=os.environ["HONE_KEY"],
                max_retries=0, timeout=120, temperature=0, max_tokens=64, seed=1)
    args.update(kw)
    return ChatOpenAI(**args)


@tool
def get_weather(city: Literal["Paris", "Rome"]) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(zone: Literal["UTC", "CET"]) -> str:
    """The time in a time zone."""
    return f"noon {zone}"


TOOLS = {t.name: t for t in (get_weather, get_time)}
SCHEMAS = {name: convert_to_openai_tool(t)["function"]["parameters"] for name, t in TOOLS.items()}
ASK = [HumanMessage("What is the weather in Paris? Use a tool.")]


class Weather(BaseModel):
    city: Literal["Paris", "Rome"]
    sunny: bool


def check_calls(msg, names, what):
    """msg's tool calls are calls of the named tools with arguments valid under their schemas,
    nothing LangChain could not parse, and no call markup left in the content."""
    check(isinstance(msg, (AIMessage, AIMessageChunk)), f"{what}: an AIMessage", msg)
    check(not msg.invalid_tool_calls, f"{what}: no invalid tool calls", msg.invalid_tool_calls)
    for c in msg.tool_calls:
        check(c["name"] in names, f"{what}: a call of {names}", c)
        jsonschema.validate(c["args"], SCHEMAS[c["name"]])
        check(c["id"], f"{what}: the call has an id", c)
    check("<tool_call>" not in str(msg.content) and "</tool_call>" not in str(msg.content), f"{what}: no call markup in the content", msg.content)


greedy = {}


@case
def invoke():
    m = llm(max_tokens=16).invoke("Say hello.")
    check(isinstance(m, AIMessage) and isinstance(m.content, str), "an AIMessage with text", m)
    u = m.usage_metadata
    check(u and u["output_tokens"] > 0 and u["input_tokens"] + u["output_tokens"] == u["total_tokens"], "usage adds up", u)
    check(m.response_metadata.get("finish_reason") in ("stop", "length") and m.response_metadata.get("model_name") == model, "response metadata", m.response_metadata)
    greedy["text"] = m.content


@case
def stream():
    chunks = list(llm(max_tokens=16, stream_usage=True).stream("Say hello."))
    check(len(chunks) > 2 and all(isinstance(c, AIMessageChunk) for c in chunks), "several AIMessageChunks", chunks[:3])
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    check(total.content == greedy.get("text"), "the chunks add up to the greedy invoke's text", (total.content, greedy.get("text")))
    u = total.usage_metadata
    check(u and u["output_tokens"] > 0 and u["input_tokens"] + u["output_tokens"] == u["total_tokens"], "stream usage (stream_options.include_usage)", u)


def what(m):
    """What an answer under tool_choice auto was: the calls made, or text."""
    return f"calls {[c['name'] for c in m.tool_calls]}" if m.tool_calls else "text"


@case
def tools_auto():
    # Under auto the model chooses: sampled under seeds 1 to 3 until an answer has a call (the
    # random-weight demo model writes one after some text under seed 1; SmolLM2-135M mostly
    # answers in text); every answer must be valid either way.
    for seed in range(1, 4):
        m = llm(temperature=1, seed=seed, max_tokens=200).bind_tools([get_weather, get_time], tool_choice="auto").invoke(ASK)
        check_calls(m, TOOLS, f"auto, seed {seed}")
        if m.tool_calls:
            break
    return f"{what(m)}, seed {seed}"


@case
def tools_required():
    m = llm().bind_tools([get_weather, get_time], tool_choice="any").invoke(ASK)
    check_calls(m, TOOLS, "required")
    check(len(m.tool_calls) >= 1, "required: at least one call", m)
    greedy["required"] = [(c["name"], c["args"]) for c in m.tool_calls]


@case
def tools_named():
    m = llm().bind_tools([get_weather, get_time], tool_choice="get_time").invoke(ASK)
    check_calls(m, {"get_time"}, "named")
    check(len(m.tool_calls) == 1, "named: exactly one call", m.tool_calls)


@case
def tools_stream():
    chunks = list(llm().bind_tools([get_weather, get_time], tool_choice="any").stream(ASK))
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    check_calls(total, TOOLS, "streamed required")
    got = [(c["name"], c["args"]) for c in total.tool_calls]
    check(got and got == greedy.get("required"), "the streamed calls add up to the greedy invoke's", (got, greedy.get("required")))


@case
def tools_cut():
    # A forced call cut by max_tokens: no call markup in the content, no partial call, streamed
    # and not alike (the "leaking call markup as content").
    bound = llm(max_tokens=8).bind_tools([get_weather, get_time], tool_choice="any")
    m = bound.invoke(ASK)
    check_calls(m, TOOLS, "cut")
    check(not m.tool_calls and "{" not in m.content and m.response_metadata.get("finish_reason") == "length", "cut: no call, no call text", m)
    chunks = list(bound.stream(ASK))
    total = chunks[0]
    for c in chunks[1:]:
        total = total + c
    check(not total.tool_calls and not total.invalid_tool_calls and total.content == m.content, "cut, streamed: the same", total)


@case
def tool_result():
    bound = llm(max_tokens=16).bind_tools([get_weather, get_time])
    call = {"name": "get_weather", "args": {"city": "Paris"}, "id": "call_1", "type": "tool_call"}
    msgs = ASK + [AIMessage(content="", tool_calls=[call]), ToolMessage(get_weather.invoke(call["args"]), tool_call_id="call_1")]
    m = bound.invoke(msgs)
    check_calls(m, TOOLS, "after a tool result")
    return what(m)


def structured(method, **kw):
    # 160 tokens: JSON may have up to 8 whitespace characters between its tokens (Hone's default,
    # docs/structured.md), which the random-weight demo model fills.
    out = llm(max_tokens=160).with_structured_output(Weather, method=method, include_raw=True, **kw).invoke("Weather in Paris, as JSON?")
    check(out["parsing_error"] is None and isinstance(out["parsed"], Weather), f"{method}: parsed into Weather", out)
    return out


@case
def structured_json_schema():
    structured("json_schema")


@case
def structured_function_calling():
    out = structured("function_calling")
    check(out["raw"].tool_calls and out["raw"].tool_calls[0]["name"] == "Weather", "function_calling: one call of the schema's tool", out["raw"])


@case
def structured_function_calling_strict():
    structured("function_calling", strict=True)


def first_ended(run):
    """run(seed) for seeds 1 to 4 until one answer ends before max_tokens. A free-form JSON
    object has no length bound: greedy decoding of the random-weight demo model repeats one
    key's text to the limit, and a sampled one may too, so it is sampled under a few seeds. Only
    the framework's length error moves on to the next seed; the last one's is the failure."""
    for seed in (1, 2, 3, 4):
        try:
            return run(seed), seed
        except openai.LengthFinishReasonError:
            if seed == 4:
                raise


@case
def structured_json_mode():
    schema = {"title": "Anything", "description": "Any JSON object.", "type": "object"}
    out, seed = first_ended(lambda seed: llm(max_tokens=160, temperature=0.7, seed=seed).with_structured_output(schema, method="json_mode").invoke("Answer with a JSON object."))
    check(isinstance(out, dict), "json_mode: a dict parsed from a JSON object", out)
    return f"seed {seed}"


@case
def structured_stream():
    parts = list(llm(max_tokens=160).with_structured_output(Weather, method="function_calling").stream("Weather in Paris?"))
    check(parts and isinstance(parts[-1], Weather), "function_calling streamed: the last part is a Weather", parts)


@case
def responses_api():
    # ChatOpenAI on the Responses API (use_responses_api=True): text, a named tool, and a
    # json_schema text format (no seed: the OpenAI client's responses.create takes none).
    m = llm(max_tokens=16, use_responses_api=True, seed=None).invoke("Say hello.")
    check(isinstance(m, AIMessage) and m.text is not None and m.usage_metadata["output_tokens"] > 0, "Responses: a message", m)
    m = llm(use_responses_api=True, seed=None).bind_tools([get_weather, get_time], tool_choice="get_time").invoke(ASK)
    check_calls(m, {"get_time"}, "Responses named")
    check(len(m.tool_calls) == 1, "Responses named: one call", m.tool_calls)
    out = llm(max_tokens=160, use_responses_api=True, seed=None).with_structured_output(Weather).invoke("Weather in Paris, as JSON?")
    check(isinstance(out, Weather), "Responses json_schema: a Weather", out)


print(json.dumps({"ok": all(c["ok"] for c in cases), "version": version("langchain-openai"), "model": model, "cases": cases}))
sys.stdout.flush()
