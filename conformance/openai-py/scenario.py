"""Drives a running Hone with the official OpenAI Python client (run by cmd/hone's
TestConformanceOpenAIPython).

Environment: HONE_URL (server base URL), HONE_KEY (API key), HONE_MODEL (served model, default
"demo"). The demo model has random weights: the checks are on shapes, parseability and what
seeds make equal, never on what the text says. Prints {"ok": true, "checks": N, ...} as its last
line; a failed check raises (non-zero exit) with what was expected and what came back.
"""
import json
import os
import sys
from typing import Literal

import jsonschema
import openai
from openai import OpenAI
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from pydantic import BaseModel, Field

model = os.environ.get("HONE_MODEL", "demo")
client = OpenAI(base_url=os.environ["HONE_URL"] + "/v1", api_key=os.environ["HONE_KEY"], max_retries=0, timeout=120)
checks = 0


def check(cond, what, got=None):
    global checks
    checks += 1
    if not cond:
        raise AssertionError(f"check failed: {what}; got {got!r}")


def expect_bad_request(what, field, **params):
    """A request that must be a 400: openai.BadRequestError whose body names field."""
    kw = {"model": model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    kw.update(params)
    try:
        r = client.chat.completions.create(**kw)
    except openai.BadRequestError as e:
        check(e.status_code == 400, f"{what}: status 400", e.status_code)
        check(isinstance(e.body, dict) and isinstance(e.body.get("message"), str) and e.body["message"], f"{what}: error body has a message", e.body)
        check(e.param == field and e.body.get("param") == field, f"{what}: error param {field}", e.body)
        return e
    raise AssertionError(f"{what}: expected BadRequestError, got {r!r}"[:600])


messages = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Tell me a story."}]
base = dict(model=model, messages=messages, max_tokens=12, seed=7, temperature=0.8, extra_body={"ignore_eos": True})
report = {"openai_version": openai.__version__}

# Models.
models = client.models.list()
check(any(m.id == model for m in models.data), "models.list has the served model", [m.id for m in models.data])

# Chat, non-streamed: a ChatCompletion with one assistant choice, finish "length" at max_tokens.
a = client.chat.completions.create(**base)
check(isinstance(a, ChatCompletion) and a.object == "chat.completion" and a.id and a.model == model, "completion object", a)
check(len(a.choices) == 1 and a.choices[0].index == 0 and a.choices[0].message.role == "assistant", "one assistant choice", a.choices)
check(isinstance(a.choices[0].message.content, str) and a.choices[0].finish_reason == "length", "text content, finish length", a.choices[0])
check(a.usage.completion_tokens == 12 and a.usage.prompt_tokens + a.usage.completion_tokens == a.usage.total_tokens, "usage adds up", a.usage)
text_a = a.choices[0].message.content

# Same seed, same text.
b = client.chat.completions.create(**base)
check(b.choices[0].message.content == text_a, "same seed, same text", [text_a, b.choices[0].message.content])

# Streamed (stream=True, iterate the chunks): same text, role first, usage chunk last.
stream = client.chat.completions.create(**base, stream=True, stream_options={"include_usage": True})
text, role, finish, usage, nchunks = "", None, None, None, 0
for chunk in stream:
    nchunks += 1
    check(isinstance(chunk, ChatCompletionChunk) and chunk.object == "chat.completion.chunk" and chunk.id, "chunk object", chunk)
    if chunk.usage:
        usage = chunk.usage
    for c in chunk.choices:
        role = role or c.delta.role
        text += c.delta.content or ""
        finish = c.finish_reason or finish
check(nchunks > 2 and role == "assistant", "several chunks, first delta has the role", (nchunks, role))
check(text == text_a, "streamed text equals non-streamed text", [text, text_a])
check(finish == "length", "stream finish_reason", finish)
check(usage is not None and usage.completion_tokens == 12 and usage.total_tokens == usage.prompt_tokens + 12, "stream usage chunk", usage)

# The stream helper: events, then the completion the chunks add up to. get_final_completion()
# raises LengthFinishReasonError at finish "length", so the answer is held to a short word.
short = dict(model=model, messages=messages, max_tokens=20, seed=7, temperature=1, extra_body={"structured_outputs": {"regex": "[a-z]{3,6}\\."}})
sa = client.chat.completions.create(**short)
text_s = sa.choices[0].message.content
check(sa.choices[0].finish_reason == "stop" and text_s.endswith("."), "structured_outputs regex: a short word, finish stop", sa.choices[0])
deltas, done_content = "", None
with client.chat.completions.stream(**short) as s:
    for ev in s:
        if ev.type == "content.delta":
            deltas += ev.delta
        elif ev.type == "content.done":
            done_content = ev.content
    final = s.get_final_completion()
check(deltas == text_s and done_content == text_s, "stream helper content events", [deltas, done_content, text_s])
check(final.choices[0].message.content == text_s and final.choices[0].finish_reason == "stop", "get_final_completion", final.choices[0])

# n = 2: two choices with their indexes, completion tokens of both; streamed, both indexes.
n2 = client.chat.completions.create(**{**base, "seed": 3}, n=2)
check([c.index for c in n2.choices] == [0, 1] and n2.usage.completion_tokens == 24, "n=2 gives two choices", n2)
idx = set()
per = {0: "", 1: ""}
for chunk in client.chat.completions.create(**{**base, "seed": 3}, n=2, stream=True):
    for c in chunk.choices:
        idx.add(c.index)
        per[c.index] += c.delta.content or ""
check(idx == {0, 1}, "n=2 streamed: both indexes", idx)
check(per[0] == n2.choices[0].message.content and per[1] == n2.choices[1].message.content, "n=2 streamed text equals non-streamed", [per, [c.message.content for c in n2.choices]])

# logprobs with 5 alternatives: the sampled token first (as vLLM), bytes spell the content.
lp = client.chat.completions.create(**{**base, "max_tokens": 5}, logprobs=True, top_logprobs=5)
content = lp.choices[0].logprobs.content
check(len(content) == 5, "one logprob entry per token", len(content))
for e in content:
    check(isinstance(e.token, str) and e.logprob <= 0 and isinstance(e.bytes, list), "logprob entry fields", e)
    check(len(e.top_logprobs) == 5 and e.top_logprobs[0].token == e.token and e.top_logprobs[0].logprob == e.logprob, "five top logprobs, sampled first", e)
    check(all(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob for i in range(2, 5)), "top logprobs sorted", e.top_logprobs)
check(bytes(b for e in content for b in e.bytes).decode("utf-8", "replace") == lp.choices[0].message.content, "logprob bytes spell the content", [[e.token for e in content], lp.choices[0].message.content])
slp = []
for chunk in client.chat.completions.create(**{**base, "max_tokens": 5}, logprobs=True, top_logprobs=2, stream=True):
    for c in chunk.choices:
        if c.logprobs and c.logprobs.content:
            slp.extend(c.logprobs.content)
check(len(slp) == 5 and all(len(e.top_logprobs) == 2 for e in slp), "streamed logprobs, one entry per token", slp)
check([e.token for e in slp] == [e.token for e in content], "streamed logprob tokens equal non-streamed", [[e.token for e in slp], [e.token for e in content]])

# Tool calls. The tools' schemas keep the arguments short (enums, bounded integers).
tools = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]}, "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city", "days"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_time", "parameters": {
        "type": "object", "properties": {"zone": {"type": "string", "enum": ["UTC", "CET"]}}, "required": ["zone"], "additionalProperties": False}}},
]
schemas = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
q = [{"role": "user", "content": "Weather in Paris for 3 days?"}]
tbase = dict(model=model, messages=q, tools=tools, max_tokens=120, temperature=1)


def check_call(tc, what, name=None):
    check(tc.type == "function" and tc.id.startswith("call_") and len(tc.id) > 5, f"{what}: call id and type", tc)
    check(tc.function.name in schemas and (name is None or tc.function.name == name), f"{what}: function name", tc.function.name)
    args = json.loads(tc.function.arguments)
    try:
        jsonschema.validate(args, schemas[tc.function.name])
        ok = True
    except jsonschema.ValidationError as err:
        ok = err.message
    check(ok is True, f"{what}: arguments match the tool's schema", (tc.function.arguments, ok))
    return args


def accumulate(chunks):
    """Accumulates streamed tool_call deltas by index, as the SDK's helpers do."""
    calls, content, finish, first = {}, "", None, {}
    for chunk in chunks:
        for c in chunk.choices:
            content += c.delta.content or ""
            finish = c.finish_reason or finish
            for d in c.delta.tool_calls or []:
                if d.index not in calls:
                    first[d.index] = d
                    calls[d.index] = {"id": d.id, "type": d.type, "name": d.function.name, "arguments": d.function.arguments or ""}
                else:
                    check(d.id is None and (d.function.name is None), "later deltas carry only arguments", d)
                    calls[d.index]["arguments"] += d.function.arguments or ""
    return [calls[i] for i in sorted(calls)], content, finish, first


required_calls = {}
for seed in (1, 2, 3):
    r = client.chat.completions.create(**tbase, tool_choice="required", seed=seed)
    c = r.choices[0]
    check(c.finish_reason == "tool_calls" and c.message.tool_calls and c.message.content is None, f"required seed {seed}: calls, no content", c)
    for tc in c.message.tool_calls:
        check_call(tc, f"required seed {seed}")
    required_calls[seed] = [(tc.function.name, tc.function.arguments) for tc in c.message.tool_calls]
    # Streamed under the same seed: the same calls, the deltas as OpenAI sends them.
    calls, content, finish, first = accumulate(client.chat.completions.create(**tbase, tool_choice="required", seed=seed, stream=True))
    check(content == "", f"required seed {seed} streamed: no content (markers never leak)", content)
    check(finish == "tool_calls", f"required seed {seed} streamed: finish tool_calls", finish)
    for i, d in first.items():
        check(d.id and d.id.startswith("call_") and d.type == "function" and d.function.name, f"required seed {seed} streamed: first delta of call {i}", d)
    check([(k["name"], k["arguments"]) for k in calls] == required_calls[seed], f"required seed {seed}: streamed calls equal non-streamed", [calls, required_calls[seed]])
    for k in calls:
        args = json.loads(k["arguments"])
        jsonschema.validate(args, schemas[k["name"]])

# parallel_tool_calls=False: exactly one call.
r = client.chat.completions.create(**tbase, tool_choice="required", parallel_tool_calls=False, seed=5)
check(len(r.choices[0].message.tool_calls or []) == 1, "parallel_tool_calls false: one call", r.choices[0].message)

# A named function: exactly one call of it (finish "stop", as OpenAI and vLLM), streamed too.
named = {"type": "function", "function": {"name": "get_time"}}
r = client.chat.completions.create(**tbase, tool_choice=named, seed=4)
c = r.choices[0]
check(len(c.message.tool_calls or []) == 1 and c.finish_reason == "stop", "named: one call, finish stop", c)
check_call(c.message.tool_calls[0], "named", "get_time")
calls, content, finish, _ = accumulate(client.chat.completions.create(**tbase, tool_choice=named, seed=4, stream=True))
check(len(calls) == 1 and calls[0]["name"] == "get_time" and content == "", "named streamed: one call", calls)
check(calls[0]["arguments"] == c.message.tool_calls[0].function.arguments, "named streamed arguments equal non-streamed", [calls, c.message.tool_calls])

# The stream helper with tools: argument events and the final completion's calls.
arg_events, done_events = "", []
with client.chat.completions.stream(**tbase, tool_choice="required", seed=2) as s:
    for ev in s:
        if ev.type == "tool_calls.function.arguments.delta":
            arg_events += ev.arguments_delta
        elif ev.type == "tool_calls.function.arguments.done":
            done_events.append((ev.name, ev.arguments))
    final = s.get_final_completion()
fc = final.choices[0].message.tool_calls
check([(tc.function.name, tc.function.arguments) for tc in fc] == required_calls[2] == done_events, "stream helper: final calls and done events", [fc, done_events, required_calls[2]])
check(arg_events == "".join(a for _, a in done_events), "stream helper: argument deltas add up", arg_events)

# A follow-up turn with the tool results (role "tool", tool_call_id), the assistant message as a
# dict and as the SDK's own message object (what users append).
r = client.chat.completions.create(**tbase, tool_choice="required", seed=1)
msg = r.choices[0].message
results = [{"role": "tool", "tool_call_id": tc.id, "content": json.dumps({"temperature_c": 21, "sky": "clear"})} for tc in msg.tool_calls]
as_dict = {"role": "assistant", "content": None, "tool_calls": [
    {"id": tc.id, "type": "function", "function": {"name": tc.function.name, "arguments": tc.function.arguments}} for tc in msg.tool_calls]}
f1 = client.chat.completions.create(model=model, messages=q + [as_dict] + results, tools=tools, max_tokens=8, seed=1)
check(f1.choices[0].finish_reason in ("stop", "length", "tool_calls"), "follow-up turn answered", f1.choices[0])
check(f1.usage.prompt_tokens > r.usage.prompt_tokens + 10, "follow-up prompt holds the call and the result", [f1.usage.prompt_tokens, r.usage.prompt_tokens])
f2 = client.chat.completions.create(model=model, messages=q + [msg] + results, tools=tools, max_tokens=8, seed=1)
check(f2.usage.prompt_tokens == f1.usage.prompt_tokens, "the SDK's message object renders as the dict", [f2.usage.prompt_tokens, f1.usage.prompt_tokens])
check(f2.choices[0].message.content == f1.choices[0].message.content and f2.choices[0].message.tool_calls == f1.choices[0].message.tool_calls, "same seed, same follow-up answer", [f1.choices[0], f2.choices[0]])


# Structured outputs: parse(response_format=<pydantic model>) gives the model instance.
class Answer(BaseModel):
    ok: bool
    n: int = Field(ge=1, le=9)
    tag: Literal["x", "y"]


for seed in (1, 2, 3):
    p = client.chat.completions.parse(model=model, messages=[{"role": "user", "content": "Answer in JSON."}], response_format=Answer, max_tokens=300, seed=seed)
    m = p.choices[0].message
    check(isinstance(m.parsed, Answer) and m.refusal is None, f"parse seed {seed}: parsed into the model", m)
    check(Answer.model_validate_json(m.content) == m.parsed and 1 <= m.parsed.n <= 9, f"parse seed {seed}: content validates", m.content)


# Strict tools from pydantic models: parsed_arguments, in parse() and in the stream helper.
class GetWeather(BaseModel):
    city: Literal["Paris", "Rome", "Oslo"]
    days: int = Field(ge=1, le=7)


ptools = [openai.pydantic_function_tool(GetWeather, name="get_weather")]
p = client.chat.completions.parse(model=model, messages=q, tools=ptools, tool_choice={"type": "function", "function": {"name": "get_weather"}}, max_tokens=120, seed=6)
tc = p.choices[0].message.tool_calls
check(len(tc) == 1 and isinstance(tc[0].function.parsed_arguments, GetWeather), "parse with a pydantic tool: parsed_arguments", tc)
parsed_done = []
with client.chat.completions.stream(model=model, messages=q, tools=ptools, tool_choice="required", max_tokens=120, seed=6) as s:
    for ev in s:
        if ev.type == "tool_calls.function.arguments.done":
            parsed_done.append(ev.parsed_arguments)
    final = s.get_final_completion()
check(parsed_done and all(isinstance(x, GetWeather) for x in parsed_done), "stream helper: parsed_arguments on done", parsed_done)
check([tc.function.parsed_arguments for tc in final.choices[0].message.tool_calls] == parsed_done, "stream helper final parsed_arguments", final.choices[0].message)

# A forced call beside a response_format is answered with the call (the format has no text to
# shape), as OpenAI answers it.
r = client.chat.completions.create(model=model, messages=q, tools=tools, tool_choice="required", response_format={"type": "json_object"}, max_tokens=120, seed=6)
check(r.choices[0].message.tool_calls, "required beside a response_format: a call", r.choices[0].message)

# Errors: openai.BadRequestError, its body naming the field.
expect_bad_request("top_logprobs 21", "top_logprobs", logprobs=True, top_logprobs=21)
expect_bad_request("json_schema without schema", "response_format.json_schema", response_format={"type": "json_schema"})
expect_bad_request("tool_choice without tools", "tool_choice", tool_choice="required")
expect_bad_request("named function not among tools", "tool_choice", tools=tools, tool_choice={"type": "function", "function": {"name": "nope"}})
expect_bad_request("required with structured_outputs", "tool_choice", tools=tools, tool_choice="required", extra_body={"structured_outputs": {"json_object": True}})
expect_bad_request("tools: []", "tools", tools=[], tool_choice="auto")
expect_bad_request("format with maxLength (cannot be enforced together)", "response_format.json_schema.schema", response_format={"type": "json_schema", "json_schema": {
    "name": "e", "schema": {"type": "object", "properties": {"e": {"type": "string", "format": "email", "maxLength": 12}}, "required": ["e"]}}})
expect_bad_request("cache_salt with a slash", "cache_salt", extra_body={"cache_salt": "a/b"})
try:
    client.chat.completions.create(model="no-such-model", messages=q, max_tokens=2)
    raise AssertionError("unknown model: expected an error")
except openai.NotFoundError as e:
    check(e.status_code == 404 and "no-such-model" in str(e.body), "unknown model: NotFoundError naming it", e.body)

# Text completions (client.completions): a string prompt, several prompts with n, echo with
# logprobs scoring a text (lm-evaluation-harness's local-completions asks exactly this), a
# stream, and errors.
from openai.types import Completion

tc = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0, logprobs=2)
check(isinstance(tc, Completion) and tc.object == "text_completion" and len(tc.choices) == 1, "completions: a Completion", tc)
lp = tc.choices[0].logprobs
check("".join(lp.tokens) == tc.choices[0].text and len(lp.token_logprobs) == len(lp.tokens) == len(lp.text_offset) == tc.usage.completion_tokens,
      "completions: tokens make the text, one logprob and offset each", lp)
check(all(1 <= len(top) <= 3 for top in lp.top_logprobs), "completions: top_logprobs of logprobs=2", lp.top_logprobs)
many = client.completions.create(model=model, prompt=["Red, green,", "One, two,"], max_tokens=3, n=2, seed=3, temperature=1)
check([c.index for c in many.choices] == [0, 1, 2, 3], "completions: two prompts, n=2, indexed prompt*n+choice", many.choices)
text = "Once upon a time" + tc.choices[0].text
scored = client.completions.create(model=model, prompt=text, max_tokens=1, temperature=0, echo=True, logprobs=1)
slp = scored.choices[0].logprobs
check(scored.choices[0].text.startswith(text) and slp.token_logprobs[0] is None and slp.top_logprobs[0] is None,
      "completions: echo puts the prompt first, its first token's logprob null", scored.choices[0])
n = tc.usage.completion_tokens
got = slp.token_logprobs[-1 - n:-1]
check(len(got) == n and all(abs(a - b) < 1e-3 for a, b in zip(got, lp.token_logprobs)),
      "completions: echoed logprobs of the greedy continuation equal those when generated", (got, lp.token_logprobs))
stream = client.completions.create(model=model, prompt="Once upon a time", max_tokens=5, temperature=0, stream=True, stream_options={"include_usage": True})
parts = list(stream)
check("".join(p.choices[0].text for p in parts if p.choices) == tc.choices[0].text and parts[-1].usage.completion_tokens == n,
      "completions: a stream adds up to the text, usage last", parts)
try:
    client.completions.create(model=model, prompt="x", suffix="y")
    raise AssertionError("suffix: expected an error")
except openai.BadRequestError as e:
    check(e.status_code == 400 and e.body.get("param") == "suffix", "completions: suffix is a 400 naming it", e.body)

report.update(ok=True, checks=checks)
print(json.dumps(report))
sys.stdout.flush()
