"""Drives a running Hone with the OpenAI Agents SDK (run by cmd/hone's
TestConformanceOpenAIAgents), unchanged and called as its users call it: agents on Hone's
Responses API (OpenAIResponsesModel) and on its chat completions (OpenAIChatCompletionsModel)
with a function tool (tool_choice required, stop at the first tool, so the tool's result is
the final output), streamed runs, a structured output_type, and a two-turn tool loop in which
the model reads the tool's result and answers, also chained on the server
(auto_previous_response_id) and read back with client.responses.retrieve.

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"). The demo model has random
weights: the checks are on what the SDK makes of the answers, not on what the text says.
Prints {"ok": true, "checks": N, ...} as its last line.
"""
import asyncio
import json
import os
import sys
from typing import Literal

from agents import (Agent, ModelSettings, OpenAIChatCompletionsModel, OpenAIResponsesModel, Runner, function_tool,
                    set_tracing_disabled)
from agents import __version__ as agents_version
from openai import AsyncOpenAI
from pydantic import BaseModel

set_tracing_disabled(True)
model_name = os.environ.get("HONE_MODEL", "demo")
client = AsyncOpenAI(base_url=os.environ["HONE_URL"] + "/v1", api_key=os.environ["HONE_KEY"], max_retries=0, timeout=120)
checks = 0


def check(cond, what, got=None):
    global checks
    checks += 1
    if not cond:
        raise AssertionError(f"check failed: {what}; got {got!r}")


calls = []


@function_tool
def get_weather(city: Literal["Paris", "Rome"]) -> str:
    """The weather in a city."""
    calls.append(city)
    return f"sunny in {city}"


class Pick(BaseModel):
    city: Literal["Paris", "Rome"]


async def main():
    report = {"agents_version": agents_version}
    for kind, model in [("responses", OpenAIResponsesModel(model=model_name, openai_client=client)),
                        ("chat", OpenAIChatCompletionsModel(model=model_name, openai_client=client))]:
        tool_agent = Agent(name="weather", instructions="Use the tool.", tools=[get_weather], model=model,
                           model_settings=ModelSettings(tool_choice="required", parallel_tool_calls=False, max_tokens=200),
                           tool_use_behavior="stop_on_first_tool")
        before = len(calls)
        res = await Runner.run(tool_agent, "What is the weather in Paris?")
        check(len(calls) == before + 1 and res.final_output == f"sunny in {calls[-1]}", f"{kind}: the tool ran and its result is the output", (calls, res.final_output))

        streamed = Runner.run_streamed(tool_agent, "And in Rome?")
        kinds = [ev.type async for ev in streamed.stream_events()]
        check("raw_response_event" in kinds and streamed.final_output == f"sunny in {calls[-1]}", f"{kind}: a streamed run with the tool", (kinds[:5], streamed.final_output))

        picker = Agent(name="picker", instructions="Pick a city.", output_type=Pick, model=model, model_settings=ModelSettings(max_tokens=40))
        res = await Runner.run(picker, "Pick a city.")
        check(isinstance(res.final_output, Pick), f"{kind}: a structured output_type", res.final_output)

        # Two turns: the tool is called (required, beside the output_type's response_format,
        # which OpenAI and Hone answer with the call), its result goes back, and the model
        # answers with the tool choice reset to auto: the output_type's JSON, which a
        # random-weight model completes (free text would run to max_output_tokens, a response
        # the SDK raises on). Under auto the random model calls the tool again about half the
        # time, so the run may take several turns: 10 allowed (4 failed one run in 8).
        settings = ModelSettings(tool_choice="required", parallel_tool_calls=False, max_tokens=200)
        loop_agent = Agent(name="loop", instructions="Use the tool, then answer.", tools=[get_weather], model=model,
                           output_type=Pick, model_settings=settings, reset_tool_choice=True)
        res = await Runner.run(loop_agent, "Weather in Paris?", max_turns=10)
        items = [it.type for it in res.new_items]
        check(items[:2] == ["tool_call_item", "tool_call_output_item"] and isinstance(res.final_output, Pick),
              f"{kind}: tool call, its output, then an answer", (items, res.final_output))
        report[kind] = items
        if kind == "responses":
            # The same loop chained on the server: each turn sends previous_response_id and
            # only its new items (Hone keeps the conversation).
            res = await Runner.run(loop_agent, "Weather in Rome?", max_turns=10, auto_previous_response_id=True)
            chained = [it.type for it in res.new_items]
            check(chained[:2] == ["tool_call_item", "tool_call_output_item"] and isinstance(res.final_output, Pick) and res.last_response_id,
                  "responses: a tool loop chained by previous_response_id", (chained, res.final_output))
            stored = await client.responses.retrieve(res.last_response_id)
            check(stored.id == res.last_response_id and stored.previous_response_id, "responses: the last response is stored, with the one it continued", stored)
    report.update(ok=True, checks=checks, tool_calls=calls)
    print(json.dumps(report))
    sys.stdout.flush()


asyncio.run(main())
