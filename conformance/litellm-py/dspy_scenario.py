"""Drives a running Hone with DSPy (whose LiteLLM engine is the litellm of this venv), unchanged
and called as its users call it (run by cmd/hone's TestConformanceDSPy).

DSPy 3.4 sends response_format (and native tools) only to a model it knows supports them. For a
self-hosted model it knows nothing, so a JSONAdapter sends no response_format at all on its
native engine, and {"type": "json_object"} on its LiteLLM engine. Two ways to get Hone's
constraints, both run here:
- Hone declared to the native engine as a provider (dspy.lm15.register_provider) with
  ModelSupport(response_schema=True, function_calling=True): response_format json_schema,
  native tools;
- the LiteLLM engine (engine="litellm") with the model registered to LiteLLM
  (litellm.register_model, supports_response_schema): the same json_schema.
Cases: Predict and ChainOfThought with typed outputs (JSONAdapter), native tool calls into a
dspy.ToolCalls output, and a ReActV2 agent (its last turn forces the submit tool by name), with
the ChatAdapter and with the JSONAdapter (which sends the tools beside its response_format).

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"); HONE_MARK_URL as in the other
scenarios. The checks are on structure (outputs of the declared types, calls of the given tools
with schema-valid arguments), never on what the text says. Every case runs; the last line
printed is {"ok": ..., "version": ..., "cases": [{"name", "ok", "error"}]}.
"""
import json
import os
import sys
import time
import traceback
import urllib.request
from importlib.metadata import version
from typing import Literal

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the cost map from GitHub
import dspy
import jsonschema
import litellm
from dspy.lm15 import AccessPolicy, ModelSupport, OpenAIChatCompat, ProviderDefinition, register_provider

model_name = os.environ.get("HONE_MODEL", "demo")
base_url, key = os.environ["HONE_URL"] + "/v1", os.environ["HONE_KEY"]
mark_url = os.environ.get("HONE_MARK_URL")
cases = []

# Hone as a provider of DSPy's native engine: the OpenAI chat wire at base_url, its models
# supporting structured outputs and tools.
register_provider(
    ProviderDefinition.chat(AccessPolicy(provider="hone", env_keys=("HONE_KEY",), base_url=base_url),
                            compat=OpenAIChatCompat(instruction_role="system", max_tokens_field="max_tokens", stream_usage="include")),
    supports=ModelSupport(response_schema=True, function_calling=True))
# 160 tokens: JSON may have up to 8 whitespace characters between its tokens (Hone's default,
# docs/structured.md), which the random-weight demo model fills.
native = dspy.LM(f"hone/{model_name}", api_key=key, max_tokens=160, temperature=0, seed=1, cache=False, num_retries=0)
litellm.register_model({f"hosted_vllm/{model_name}": {"litellm_provider": "hosted_vllm", "mode": "chat", "supports_response_schema": True,
                                                      "supports_function_calling": True, "supports_tool_choice": True}})
via_litellm = dspy.LM(f"hosted_vllm/{model_name}", engine="litellm", api_base=base_url, api_key=key, max_tokens=160, temperature=0,
                      seed=1, cache=False, num_retries=0)


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


class Weather(dspy.Signature):
    """Say what the weather is."""
    question: str = dspy.InputField()
    city: Literal["Paris", "Rome"] = dspy.OutputField()
    sunny: bool = dspy.OutputField()


def get_weather(city: Literal["Paris", "Rome"]) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


SCHEMAS = {"get_weather": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome"]}}, "required": ["city"]}}


def check_weather(p, what):
    check(p.city in ("Paris", "Rome") and isinstance(p.sunny, bool), f"{what}: typed outputs", p)


@case
def predict_native():
    with dspy.context(lm=native, adapter=dspy.JSONAdapter()):
        check_weather(dspy.Predict(Weather)(question="Weather in Paris?"), "native engine")


@case
def chain_of_thought_native():
    with dspy.context(lm=native, adapter=dspy.JSONAdapter()):
        p = dspy.ChainOfThought(Weather)(question="Weather in Paris?")
    check_weather(p, "ChainOfThought")
    check(isinstance(p.reasoning, str), "ChainOfThought: reasoning text", p)


@case
def predict_litellm_engine():
    with dspy.context(lm=via_litellm, adapter=dspy.JSONAdapter()):
        check_weather(dspy.Predict(Weather)(question="Weather in Paris?"), "LiteLLM engine")


class Act(dspy.Signature):
    """Use a tool to answer."""
    question: str = dspy.InputField()
    tools: list[dspy.Tool] = dspy.InputField()
    calls: dspy.ToolCalls = dspy.OutputField()


def tool_calls(adapter):
    with dspy.context(lm=native, adapter=adapter):
        p = dspy.Predict(Act)(question="Weather in Paris?", tools=[dspy.Tool(get_weather)])
    calls = p.calls.tool_calls if p.calls else []
    for c in calls:
        check(c.name == "get_weather", "a call of the given tool", c)
        jsonschema.validate(c.args, SCHEMAS["get_weather"])
    return f"calls {[c.name for c in calls]}" if calls else "no call"


def react(adapter, what):
    agent = dspy.ReActV2(Weather, tools=[get_weather], max_iters=1)
    with dspy.context(lm=native, adapter=adapter):
        p = agent(question="Weather in Paris?")
    check_weather(p, what)
    check(p.termination_reason in ("submit", "forced_submit"), f"{what} ended on its submit tool", p.termination_reason)
    return p.termination_reason


@case
def tool_calls_native():
    return tool_calls(dspy.ChatAdapter(use_native_function_calling=True))


@case
def react_native():
    return react(dspy.ChatAdapter(use_native_function_calling=True), "ReActV2")


@case
def tool_calls_json_adapter():
    # The JSONAdapter sends the tools beside a response_format for the other output fields,
    # under tool_choice auto: the model may call or answer in the format.
    return tool_calls(dspy.JSONAdapter(use_native_function_calling=True))


@case
def react_json_adapter():
    # ReActV2's last turn forces its submit tool by name, beside the JSONAdapter's
    # response_format: the answer is the call.
    return react(dspy.JSONAdapter(use_native_function_calling=True), "ReActV2 (JSONAdapter)")


print(json.dumps({"ok": all(c["ok"] for c in cases), "version": version("dspy"), "model": model_name, "cases": cases}))
sys.stdout.flush()
