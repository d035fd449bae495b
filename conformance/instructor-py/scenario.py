"""Drives a running Hone with instructor, unchanged and called as its users call it (run by
cmd/hone's TestConformanceInstructor): instructor.from_openai on the official OpenAI client, a
response_model in the modes an OpenAI-compatible server takes: TOOLS (the default: a named tool
choice), TOOLS_STRICT, PARALLEL_TOOLS (tool_choice auto, an Iterable of models), JSON
(response_format json_object), JSON_SCHEMA (response_format json_schema) and RESPONSES_TOOLS (the
Responses API), and a partial model streamed (create_partial).

MD_JSON is not among them: it sends a plain chat request and relies on the model alone to write
JSON, which Hone cannot shape.

Environment: HONE_URL, HONE_KEY, HONE_MODEL (default "demo"); HONE_MARK_URL, when set, is told
each case's name before it runs (GET HONE_MARK_URL/<model>/<case>). The checks are on structure
(objects validated by instructor against the response model), never on what the text says. Every
case runs; the last line printed is {"ok": ..., "version": ..., "cases": [{"name", "ok", "error"}]}.
"""
import json
import os
import sys
import time
import traceback
import urllib.request
from importlib.metadata import version
from typing import Iterable, Literal

import instructor
from instructor.core.exceptions import IncompleteOutputException, InstructorRetryException
from openai import OpenAI
from pydantic import BaseModel

model = os.environ.get("HONE_MODEL", "demo")
mark_url = os.environ.get("HONE_MARK_URL")
seen = []  # the completions instructor received (its completion:response hook)
openai_client = OpenAI(base_url=os.environ["HONE_URL"] + "/v1", api_key=os.environ["HONE_KEY"], max_retries=0, timeout=120)
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


class Weather(BaseModel):
    city: Literal["Paris", "Rome"]
    sunny: bool


class Notes(BaseModel):
    """Anything the model notes; every field optional, so any JSON object validates."""
    city: str | None = None
    note: str | None = None


ASK = [{"role": "user", "content": "What is the weather in Paris?"}]
# 160 tokens: JSON may have up to 8 whitespace characters between its tokens (Hone's default,
# docs/structured.md), which the random-weight demo model fills.
OPTS = dict(model=model, messages=ASK, max_tokens=160, temperature=0, seed=1, max_retries=0)


def weather(mode, **kw):
    client = instructor.from_openai(openai_client, mode=mode)
    out = client.chat.completions.create(response_model=Weather, **{**OPTS, **kw})
    check(isinstance(out, Weather), f"{mode}: a Weather", out)


@case
def tools():
    weather(instructor.Mode.TOOLS)


@case
def tools_strict():
    # In instructor 1.17 TOOLS_STRICT is an alias of TOOLS: the tool goes without "strict".
    weather(instructor.Mode.TOOLS_STRICT)


@case
def json_schema():
    weather(instructor.Mode.JSON_SCHEMA)


@case
def json_object():
    # JSON mode shapes a JSON object, not the schema (instructor puts that in the prompt), so the
    # response model takes any object. A free-form object has no length bound: greedy decoding
    # of the random-weight demo model repeats one key's text to the limit, and a sampled one may
    # too, so it is sampled under seeds 1 to 4 until one ends; only instructor's length error
    # moves on to the next seed.
    client = instructor.from_openai(openai_client, mode=instructor.Mode.JSON)
    for seed in (1, 2, 3, 4):
        try:
            out = client.chat.completions.create(response_model=Notes, **{**OPTS, "temperature": 0.7, "seed": seed})
            break
        except IncompleteOutputException:
            if seed == 4:
                raise
    check(isinstance(out, Notes), "JSON: Notes", out)
    return f"seed {seed}"


@case
def parallel_tools():
    # tool_choice auto with the models as tools: the answer is the calls the model made, and
    # instructor refuses an answer cut at max_tokens, or one the model gave as text (which auto
    # allows: SmolLM2-135M answers this one in text). Sampled (seeded): under greedy decoding the
    # random-weight demo model repeats one word to the limit; with this seed it calls the tool.
    # A sampled text answer may also run to max_tokens (auto allows that too): only instructor's
    # length error on an answer in text moves on to the next seed.
    client = instructor.from_openai(openai_client, mode=instructor.Mode.PARALLEL_TOOLS)
    client.on("completion:response", seen.append)
    try:
        for seed in (30, 31, 32, 33):
            try:
                out = list(client.chat.completions.create(response_model=Iterable[Weather], **{**OPTS, "max_tokens": 400, "temperature": 1, "seed": seed}))
                break
            except IncompleteOutputException:
                m = seen[-1].choices[0].message
                check(not m.tool_calls and "<tool_call>" not in (m.content or ""), "PARALLEL_TOOLS: a cut answer is text, not a call", seen[-1])
                if seed == 33:
                    raise
    except InstructorRetryException as e:
        r = seen[-1]
        m = r.choices[0].message
        check("No tool calls in response" in str(e) and r.choices[0].finish_reason == "stop" and not m.tool_calls and "<tool_call>" not in m.content,
              "PARALLEL_TOOLS: refused only for a whole answer in text", (e, r))
        return "text"
    check(out and all(isinstance(w, Weather) for w in out), "PARALLEL_TOOLS: Weathers", out)
    return f"calls {len(out)}, seed {seed}"


@case
def partial_stream():
    client = instructor.from_openai(openai_client, mode=instructor.Mode.TOOLS)
    parts = list(client.chat.completions.create_partial(response_model=Weather, **OPTS))
    check(parts and Weather.model_validate(parts[-1].model_dump()), "create_partial: the last partial is a whole Weather", parts)


@case
def responses_tools():
    client = instructor.from_openai(openai_client, mode=instructor.Mode.RESPONSES_TOOLS)
    out = client.responses.create(model=model, input="What is the weather in Paris?", response_model=Weather,
                                  max_output_tokens=160, temperature=0, max_retries=0)
    check(isinstance(out, Weather), "RESPONSES_TOOLS: a Weather", out)


print(json.dumps({"ok": all(c["ok"] for c in cases), "version": version("instructor"), "model": model, "cases": cases}))
sys.stdout.flush()
