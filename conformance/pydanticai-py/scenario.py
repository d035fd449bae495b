"""Drives a running Hone with Pydantic AI (pydantic-ai-slim[openai]: the same code as the
`pydantic-ai` package without its other providers' SDKs), unchanged and called as its users call
it (run by cmd/hone's TestConformancePydanticAI): OpenAIChatModel on the vLLM provider (Hone
serves vLLM's API) and once on the generic OpenAI-compatible provider; an agent's text run,
streamed; function tools in an agent loop (tool_choice auto, as Pydantic AI sends it on every
request with tools); single requests (pydantic_ai.direct) with tool_choice required and a named
tool, plain and streamed; structured output in the three modes (ToolOutput, the default:
tool_choice required or the output tool named; NativeOutput: response_format json_schema;
PromptedOutput: response_format json_object), plain and streamed; and OpenAIResponsesModel on
Hone's Responses API.

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"); HONE_MARK_URL, when set, is told
each case's name before it runs (GET HONE_MARK_URL/<model>/<case>). The checks are on structure
(calls of the given tools with schema-valid arguments, each answered; output objects validated by
Pydantic AI; a stream that adds up to the greedy run), never on what the text says. Every case
runs; the last line printed is {"ok": ..., "version": ..., "cases": [{"name", "ok", "error"}]}.
"""
import asyncio
import json
import os
import sys
import time
import traceback
import urllib.request
from importlib.metadata import version
from typing import Any, Literal

import jsonschema
from pydantic import BaseModel
from pydantic_ai import (Agent, ModelRequest, ModelSettings, NativeOutput, OutputTokenLimitExceeded, PromptedOutput, RunContext,
                         Tool, ToolCallPart, ToolOutput, ToolReturnPart, UsageLimits)
from pydantic_ai.direct import model_request, model_request_stream
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.openai import OpenAIChatModel, OpenAIResponsesModel
from pydantic_ai.providers.openai_compatible import OpenAICompatibleProvider
from pydantic_ai.providers.vllm import VLLMProvider
from pydantic_ai.tools import ToolDefinition

model_name = os.environ.get("HONE_MODEL", "demo")
base_url, key = os.environ["HONE_URL"] + "/v1", os.environ["HONE_KEY"]
mark_url = os.environ.get("HONE_MARK_URL")
model = OpenAIChatModel(model_name, provider=VLLMProvider(base_url=base_url, api_key=key))
cases = []


async def case(fn):
    """Runs one case and records whether it passed (an exception is a failure, with its text) and
    what it returned (what the model did, where that may vary: a call or text)."""
    name = fn.__name__
    if mark_url:
        urllib.request.urlopen(f"{mark_url}/{model_name}/{name}").read()
    start = time.monotonic()
    try:
        detail = await fn()
        cases.append({"name": name, "ok": True, **({"detail": detail} if detail else {})})
    except Exception as e:  # a failed case is reported, the others still run
        cases.append({"name": name, "ok": False, "error": f"{type(e).__name__}: {e}"[:1500],
                      "where": traceback.format_exc(limit=-3)[-1500:]})
    cases[-1]["seconds"] = round(time.monotonic() - start, 1)


def check(cond, what, got=None):
    if not cond:
        raise AssertionError(f"{what}; got {got!r}"[:1500])


def settings(**kw):
    s = ModelSettings(max_tokens=64, temperature=0, seed=1)
    s.update(kw)
    return s


class Weather(BaseModel):
    city: Literal["Paris", "Rome"]
    sunny: bool


class Notes(BaseModel):
    """Anything the model notes; every field optional and of any type, so any JSON object
    validates (what is checked is that Hone answers json_object mode with one: a 135M model
    follows the prompt's schema by chance, e.g. {"note": {"title": ...}})."""
    city: Any = None
    note: Any = None


def get_weather(city: Literal["Paris", "Rome"]) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def get_time(zone: Literal["UTC", "CET"]) -> str:
    """The time in a time zone."""
    return f"noon {zone}"


TOOL_DEFS = [ToolDefinition(name="get_weather", description="The weather in a city.",
                            parameters_json_schema={"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}, "required": ["city"]}),
             ToolDefinition(name="get_time", description="The time in a time zone.",
                            parameters_json_schema={"type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"]})]
SCHEMAS = {t.name: t.parameters_json_schema for t in TOOL_DEFS}
ASK = [ModelRequest.user_text_prompt("What is the weather in Paris? Use a tool.")]
greedy = {}


def check_calls(parts, names, what):
    """The response parts' tool calls are calls of the named tools with schema-valid arguments."""
    calls = [p for p in parts if isinstance(p, ToolCallPart)]
    for c in calls:
        check(c.tool_name in names, f"{what}: a call of {names}", c)
        jsonschema.validate(c.args_as_dict(), SCHEMAS[c.tool_name])
        check(c.tool_call_id, f"{what}: the call has an id", c)
    text = "".join(getattr(p, "content", "") for p in parts if p.part_kind == "text")
    check("<tool_call>" not in text and "</tool_call>" not in text, f"{what}: no call markup in the text", text)
    return calls


def check_loop(result, what):
    """Every call the agent's model made is of a known tool, valid, and answered by its return."""
    calls, returns = [], set()
    for m in result.all_messages():
        for p in m.parts:
            if isinstance(p, ToolCallPart):
                calls.append(p)
            elif isinstance(p, ToolReturnPart):
                returns.add(p.tool_call_id)
    for c in calls:
        if c.tool_name in SCHEMAS:
            jsonschema.validate(c.args_as_dict(), SCHEMAS[c.tool_name])
        check(c.tool_call_id in returns, f"{what}: every call answered", (c, returns))
    return calls


async def run_text():
    r = await Agent(model, model_settings=settings(max_tokens=16)).run("Say hello.")
    check(isinstance(r.output, str), "a text output", r.output)
    u = r.usage
    check(u.requests == 1 and u.output_tokens > 0 and u.input_tokens > 0, "usage", u)
    greedy["text"] = r.output


async def run_stream_text():
    async with Agent(model, model_settings=settings(max_tokens=16)).run_stream("Say hello.") as r:
        deltas = [d async for d in r.stream_text(delta=True)]
        u = r.usage
    check("".join(deltas) == greedy.get("text"), "the deltas add up to the greedy run's text", (deltas, greedy.get("text")))
    check(u.output_tokens > 0 and u.input_tokens > 0, "usage from the stream (stream_options.include_usage)", u)


async def tools_auto_agent():
    agent = Agent(model, tools=[get_weather, get_time], model_settings=settings(max_tokens=48))
    r = await agent.run("What is the weather in Paris?", usage_limits=UsageLimits(request_limit=4))
    check(isinstance(r.output, str), "a text output after the loop", r.output)
    calls = check_loop(r, "auto loop")
    return f"calls {[c.tool_name for c in calls]}" if calls else "text"


async def tools_required():
    resp = await model_request(model, ASK, model_settings=settings(tool_choice="required"),
                               model_request_parameters=ModelRequestParameters(function_tools=TOOL_DEFS, allow_text_output=True))
    calls = check_calls(resp.parts, SCHEMAS, "required")
    check(calls, "required: at least one call", resp.parts)
    greedy["required"] = [(c.tool_name, c.args_as_dict()) for c in calls]


async def tools_named():
    resp = await model_request(model, ASK, model_settings=settings(tool_choice=["get_time"]),
                               model_request_parameters=ModelRequestParameters(function_tools=TOOL_DEFS, allow_text_output=True))
    calls = check_calls(resp.parts, {"get_time"}, "named")
    check(len(calls) == 1, "named: one call", resp.parts)


async def tools_stream():
    async with model_request_stream(model, ASK, model_settings=settings(tool_choice="required"),
                                    model_request_parameters=ModelRequestParameters(function_tools=TOOL_DEFS, allow_text_output=True)) as s:
        async for _ in s:
            pass
        resp = s.get()
    calls = check_calls(resp.parts, SCHEMAS, "streamed required")
    got = [(c.tool_name, c.args_as_dict()) for c in calls]
    check(got and got == greedy.get("required"), "the streamed calls add up to the greedy request's", (got, greedy.get("required")))


async def output_tool():
    r = await Agent(model, output_type=Weather, model_settings=settings()).run("Weather in Paris?")
    check(isinstance(r.output, Weather), "ToolOutput: a Weather", r.output)


async def output_tool_named():
    # The output tool named in tool_choice: the agent's way to force one tool.
    agent = Agent(model, output_type=ToolOutput(Weather, name="final_result"), tools=[get_weather], model_settings=settings(tool_choice=["final_result"]))
    r = await agent.run("Weather in Paris?")
    check(isinstance(r.output, Weather), "named output tool: a Weather", r.output)


async def output_tool_with_tools():
    # Each function tool is offered until it has been called (its prepare hides it then), so a
    # model that keeps calling tools, as the random-weight demo model does, still ends on the
    # output tool: tool_choice required while function tools remain, then the output tool alone.
    async def once(ctx: RunContext, tool_def: ToolDefinition):
        called = any(isinstance(p, ToolCallPart) and p.tool_name == tool_def.name for m in ctx.messages for p in m.parts)
        return None if called else tool_def

    agent = Agent(model, output_type=Weather, tools=[Tool(get_weather, prepare=once), Tool(get_time, prepare=once)], model_settings=settings())
    r = await agent.run("Weather in Paris?", usage_limits=UsageLimits(request_limit=4))
    check(isinstance(r.output, Weather), "function tools and the output tool (required): a Weather", r.output)
    check_loop(r, "required loop")


async def output_native():
    # 160 tokens: JSON may have up to 8 whitespace characters between its tokens (Hone's default,
    # docs/structured.md), which the random-weight demo model fills.
    r = await Agent(model, output_type=NativeOutput(Weather), model_settings=settings(max_tokens=160)).run("Weather in Paris?")
    check(isinstance(r.output, Weather), "NativeOutput: a Weather", r.output)


async def output_native_with_tools():
    # NativeOutput beside function tools: tool_choice auto with tools and a json_schema
    # response_format, where the model may call a tool or answer in the format (OpenAI's
    # behaviour; vLLM's format would shape every answer, so no call could be written).
    async def once(ctx: RunContext, tool_def: ToolDefinition):
        called = any(isinstance(p, ToolCallPart) and p.tool_name == tool_def.name for m in ctx.messages for p in m.parts)
        return None if called else tool_def

    agent = Agent(model, output_type=NativeOutput(Weather), tools=[Tool(get_weather, prepare=once)],
                  model_settings=settings(max_tokens=160, temperature=1))
    r = await agent.run("Weather in Paris?", usage_limits=UsageLimits(request_limit=4))
    check(isinstance(r.output, Weather), "NativeOutput with tools: a Weather", r.output)
    calls = check_loop(r, "NativeOutput with tools")
    return f"{len(calls)} calls"


async def output_prompted():
    # A free-form JSON object (response_format json_object; the schema is only in the prompt) has
    # no length bound: greedy decoding of the random-weight demo model repeats one key's text to
    # the limit, and a sampled one may too, so it is sampled under seeds 1 to 4 until one ends.
    # Only Pydantic AI's token-limit error moves on to the next seed.
    for seed in (1, 2, 3, 4):
        agent = Agent(model, output_type=PromptedOutput(Notes), model_settings=settings(max_tokens=160, temperature=0.7, seed=seed))
        try:
            r = await agent.run("Note the weather in Paris.")
            break
        except OutputTokenLimitExceeded:
            if seed == 4:
                raise
    check(isinstance(r.output, Notes), "PromptedOutput: Notes", r.output)
    return f"seed {seed}"


async def stream_output_tool():
    async with Agent(model, output_type=Weather, model_settings=settings()).run_stream("Weather in Paris?") as r:
        parts = [p async for p in r.stream_output()]
        out = await r.get_output()
    check(isinstance(out, Weather) and parts and isinstance(parts[-1], Weather), "streamed ToolOutput: a Weather", (parts, out))


async def stream_output_native():
    async with Agent(model, output_type=NativeOutput(Weather), model_settings=settings(max_tokens=160)).run_stream("Weather in Paris?") as r:
        parts = [p async for p in r.stream_output()]
        out = await r.get_output()
    check(isinstance(out, Weather) and parts, "streamed NativeOutput: a Weather", (parts, out))


async def openai_compatible_provider():
    # The generic provider (no vLLM profile): the same ToolOutput run.
    generic = OpenAIChatModel(model_name, provider=OpenAICompatibleProvider("hone", base_url=base_url, api_key=key))
    r = await Agent(generic, output_type=Weather, model_settings=settings()).run("Weather in Paris?")
    check(isinstance(r.output, Weather), "OpenAICompatibleProvider ToolOutput: a Weather", r.output)


async def responses_model():
    # OpenAIResponsesModel: Hone's Responses API, the output tool (tool_choice required) and a
    # native json_schema text format streamed.
    responses = OpenAIResponsesModel(model_name, provider=OpenAICompatibleProvider("hone", base_url=base_url, api_key=key))
    r = await Agent(responses, output_type=Weather, model_settings=settings()).run("Weather in Paris?")
    check(isinstance(r.output, Weather), "Responses ToolOutput: a Weather", r.output)
    async with Agent(responses, output_type=NativeOutput(Weather), model_settings=settings(max_tokens=160)).run_stream("Weather in Paris?") as s:
        out = await s.get_output()
    check(isinstance(out, Weather), "Responses NativeOutput streamed: a Weather", out)


async def main():
    for fn in (run_text, run_stream_text, tools_auto_agent, tools_required, tools_named, tools_stream, output_tool,
               output_tool_named, output_tool_with_tools, output_native, output_native_with_tools, output_prompted, stream_output_tool,
               stream_output_native, openai_compatible_provider, responses_model):
        await case(fn)
    print(json.dumps({"ok": all(c["ok"] for c in cases), "version": version("pydantic-ai-slim"), "model": model_name, "cases": cases}))
    sys.stdout.flush()


asyncio.run(main())
