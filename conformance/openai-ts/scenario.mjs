// Drives a running Hone with the official OpenAI TypeScript client and checks what a client of
// vLLM relies on. Environment: HONE_URL (server base URL), HONE_KEY (API key), HONE_MODEL
// (served model, default "demo"). Prints {"ok": true, "checks": N} as its last line; any failed
// check throws (non-zero exit) with what was expected and what came back.
import OpenAI from "openai";

const model = process.env.HONE_MODEL || "demo";
const client = new OpenAI({ baseURL: process.env.HONE_URL + "/v1", apiKey: process.env.HONE_KEY, maxRetries: 0, timeout: 120_000 });
let checks = 0;

function check(cond, what, got) {
  checks++;
  if (!cond) throw new Error(`check failed: ${what}; got ${JSON.stringify(got)}`);
}

async function expectError(status, params, what, param) {
  try {
    const r = await client.chat.completions.create({ model, messages: [{ role: "user", content: "Hi" }], max_tokens: 4, ...params });
    throw new Error(`${what}: expected HTTP ${status}, got a response ${JSON.stringify(r).slice(0, 300)}`);
  } catch (e) {
    if (!(e instanceof OpenAI.APIError)) throw e;
    check(e.status === status, `${what}: status ${status}`, { status: e.status, error: e.error });
    check(typeof e.error?.message === "string" && e.error.message.length > 0, `${what}: error message`, e.error);
    if (param !== undefined) check(e.error?.param === param, `${what}: param ${param}`, e.error);
    return e;
  }
}

const messages = [{ role: "system", content: "You are terse." }, { role: "user", content: "Tell me a story." }];

// Models.
const models = await client.models.list();
check(models.data.some((m) => m.id === model), "models.list has the served model", models.data.map((m) => m.id));

// Non-streaming, seeded; usage arithmetic; finish "length" at the limit.
const base = { model, messages, max_tokens: 12, seed: 7, temperature: 0.8, ignore_eos: true };
const a = await client.chat.completions.create(base);
check(a.object === "chat.completion" && a.id.length > 0 && a.model === model, "completion object", a);
check(a.choices.length === 1 && a.choices[0].message.role === "assistant", "one assistant choice", a.choices);
check(a.choices[0].finish_reason === "length", "finish_reason length at max_tokens", a.choices[0]);
check(a.usage.completion_tokens === 12, "completion_tokens = max_tokens", a.usage);
check(a.usage.prompt_tokens + a.usage.completion_tokens === a.usage.total_tokens, "usage adds up", a.usage);

// Same seed, same output.
const b = await client.chat.completions.create(base);
check(b.choices[0].message.content === a.choices[0].message.content, "same seed, same text", [a.choices[0].message.content, b.choices[0].message.content]);

// Streaming gives the same text under the same seed, role first, usage chunk last.
const stream = await client.chat.completions.create({ ...base, stream: true, stream_options: { include_usage: true } });
let text = "", role = null, finish = null, usage = null, chunks = 0;
for await (const chunk of stream) {
  chunks++;
  check(chunk.object === "chat.completion.chunk", "chunk object", chunk);
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta.role) role = role ?? c.delta.role;
    if (c.delta.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
check(role === "assistant", "first delta carries the role", role);
check(text === a.choices[0].message.content, "streamed text equals non-streamed text", [text, a.choices[0].message.content]);
check(finish === "length", "stream finish_reason", finish);
check(usage && usage.completion_tokens === 12 && usage.total_tokens === usage.prompt_tokens + 12, "stream usage chunk", usage);

// n = 2: two choices with their indexes; completion tokens summed.
const n2 = await client.chat.completions.create({ ...base, n: 2, seed: 3 });
check(n2.choices.length === 2 && n2.choices[0].index === 0 && n2.choices[1].index === 1, "n=2 gives two choices", n2.choices);
check(n2.usage.completion_tokens === 24, "n=2 usage counts both", n2.usage);

// logprobs with 5 alternatives; as in vLLM the sampled token comes first, then the most likely.
const lp = await client.chat.completions.create({ ...base, max_tokens: 5, logprobs: true, top_logprobs: 5 });
const content = lp.choices[0].logprobs.content;
check(content.length === 5, "one logprob entry per token", content.length);
for (const e of content) {
  check(typeof e.token === "string" && e.logprob <= 0 && Array.isArray(e.bytes), "logprob entry fields", e);
  check(e.top_logprobs.length === 5, "five top logprobs", e.top_logprobs.length);
  check(e.top_logprobs[0].token === e.token && e.top_logprobs[0].logprob === e.logprob, "sampled token first", e);
  for (let i = 2; i < e.top_logprobs.length; i++) check(e.top_logprobs[i - 1].logprob >= e.top_logprobs[i].logprob, "top logprobs sorted", e.top_logprobs);
}
const lpText = lp.choices[0].message.content;
const lpBytes = Buffer.from(content.flatMap((e) => e.bytes));
check(lpBytes.toString("utf8") === lpText, "logprob bytes spell the content (raw bytes of tokens inside a character)", [content.map((e) => e.token), lpText]);
await expectError(400, { logprobs: true, top_logprobs: 21 }, "top_logprobs 21");

// prompt_logprobs (a vLLM extension field; the client passes it through).
const pl = await client.chat.completions.create({ ...base, max_tokens: 2, prompt_logprobs: 2, return_token_ids: true });
check(Array.isArray(pl.prompt_logprobs) && pl.prompt_logprobs.length === pl.usage.prompt_tokens, "prompt_logprobs per prompt token", pl.prompt_logprobs?.length);
check(pl.prompt_logprobs[0] === null, "first prompt position has no logprob", pl.prompt_logprobs[0]);
check(Array.isArray(pl.prompt_token_ids) && pl.prompt_token_ids.length === pl.usage.prompt_tokens, "prompt_token_ids", pl.prompt_token_ids?.length);

// Stop strings across token boundaries: stop at a piece of text the model produces.
const full = a.choices[0].message.content;
let stop = null;
for (let i = 2; i + 2 <= full.length && !stop; i++) {
  const s = full.slice(i, i + 2);
  if (s.trim().length === 2 && !s.includes("\uFFFD") && full.indexOf(s) === i) stop = s;
}
if (stop) {
  const st = await client.chat.completions.create({ ...base, stop: [stop] });
  const want = full.slice(0, full.indexOf(stop));
  check(st.choices[0].message.content === want, "text ends before the stop string", [st.choices[0].message.content, want, stop]);
  check(st.choices[0].finish_reason === "stop" && st.choices[0].stop_reason === stop, "finish stop with stop_reason", st.choices[0]);
  const inc = await client.chat.completions.create({ ...base, stop: [stop], include_stop_str_in_output: true });
  check(inc.choices[0].message.content === want + stop, "include_stop_str_in_output", inc.choices[0].message.content);
}

// Prefix cache: a repeated long prompt reports cached tokens; another cache_salt shares nothing.
const long = [{ role: "user", content: "Please summarise the following text about rivers, lakes and the sea: ".repeat(4) }];
const c1 = await client.chat.completions.create({ model, messages: long, max_tokens: 2, cache_salt: "conformance-a" });
const c2 = await client.chat.completions.create({ model, messages: long, max_tokens: 2, cache_salt: "conformance-a" });
const c3 = await client.chat.completions.create({ model, messages: long, max_tokens: 2, cache_salt: "conformance-b" });
check(c1.usage.prompt_tokens_details.cached_tokens === 0, "first request has no cached tokens", c1.usage);
check(c2.usage.prompt_tokens_details.cached_tokens > 0 && c2.usage.prompt_tokens_details.cached_tokens < c2.usage.prompt_tokens, "repeat reports cached tokens", c2.usage);
check(c3.usage.prompt_tokens_details.cached_tokens === 0, "another cache_salt shares nothing", c3.usage);
await expectError(400, { cache_salt: "a/b" }, "cache_salt with a slash", "cache_salt");

// repetition_detection: greedy decoding of the demo model loops; the choice ends with finish
// "repetition" where the output first ends in a pattern of 1..6 tokens repeated 3 times.
const greedy = { model, messages: [{ role: "user", content: "Count" }], temperature: 0, ignore_eos: true, max_tokens: 120, return_token_ids: true };
const freeRun = await client.chat.completions.create(greedy);
const ids = freeRun.choices[0].token_ids;
const repeats = (t) => {
  for (let size = 1; size <= 6 && size * 3 <= t.length; size++) {
    let ok = true;
    for (let k = 1; k < 3 && ok; k++) for (let j = 1; j <= size && ok; j++) ok = t[t.length - j] === t[t.length - k * size - j];
    if (ok) return true;
  }
  return false;
};
let loopAt = -1;
for (let k = 1; k <= ids.length && loopAt < 0; k++) if (repeats(ids.slice(0, k))) loopAt = k;
check(loopAt > 0, "greedy demo output loops", ids);
const rep = await client.chat.completions.create({ ...greedy, repetition_detection: { max_pattern_size: 6, min_count: 3 } });
check(rep.choices[0].finish_reason === "repetition" && rep.choices[0].token_ids.length === loopAt, "finish repetition where the loop completes", [rep.choices[0].finish_reason, rep.choices[0].token_ids.length, loopAt]);
await expectError(400, { repetition_detection: { max_pattern_size: 4, min_count: 1 } }, "repetition_detection min_count 1", "repetition_detection");
await expectError(400, { repetition_detection: { max_pattern_size: 2, min_pattern_size: 3, min_count: 2 } }, "repetition_detection min > max", "repetition_detection");

// Beam search: n beams, distinct, ranked; the same again gives the same beams; streamed too.
const beamReq = { model, messages, max_tokens: 6, n: 3, use_beam_search: true, ignore_eos: true, length_penalty: 1.0 };
const bs1 = await client.chat.completions.create(beamReq);
const bs2 = await client.chat.completions.create(beamReq);
check(bs1.choices.length === 3 && new Set(bs1.choices.map((c) => c.message.content)).size >= 2, "three beams, not all equal", bs1.choices);
check(bs1.choices.every((c, i) => c.message.content === bs2.choices[i].message.content), "beam search is deterministic", [bs1.choices, bs2.choices]);
const bsStream = await client.chat.completions.create({ ...beamReq, stream: true });
const bsText = ["", "", ""];
for await (const chunk of bsStream) for (const c of chunk.choices) if (c.delta.content) bsText[c.index] += c.delta.content;
check(bsText.every((t, i) => t === bs1.choices[i].message.content), "streamed beams equal non-streamed", [bsText, bs1.choices.map((c) => c.message.content)]);

// Structured outputs: the output always satisfies the constraint, whatever the (random) model.
const q = [{ role: "user", content: "Answer in the required format." }];
const choices = ["alpha", "beta", "gamma delta"];
for (let seed = 0; seed < 3; seed++) {
  const c = await client.chat.completions.create({ model, messages: q, max_tokens: 20, seed, structured_outputs: { choice: choices } });
  check(choices.includes(c.choices[0].message.content) && c.choices[0].finish_reason === "stop", "choice output is one of the choices", c.choices[0]);
}
const rx = await client.chat.completions.create({ model, messages: q, max_tokens: 30, seed: 1, structured_outputs: { regex: "[A-Z][a-z]{2,5}-[0-9]{3}" } });
check(/^[A-Z][a-z]{2,5}-[0-9]{3}$/.test(rx.choices[0].message.content), "regex output matches fully", rx.choices[0].message.content);
const schema = { type: "object", properties: { ok: { type: "boolean" }, n: { type: "integer", minimum: 1, maximum: 9 }, tag: { type: "string", enum: ["x", "y"] } }, required: ["ok", "n", "tag"], additionalProperties: false };
for (let seed = 0; seed < 3; seed++) {
  const js = await client.chat.completions.create({ model, messages: q, max_tokens: 80, seed, response_format: { type: "json_schema", json_schema: { name: "answer", schema, strict: true } } });
  const obj = JSON.parse(js.choices[0].message.content);
  check(typeof obj.ok === "boolean" && Number.isInteger(obj.n) && obj.n >= 1 && obj.n <= 9 && ["x", "y"].includes(obj.tag) && Object.keys(obj).length === 3, "json_schema output validates", obj);
}
const jsStruct = await client.chat.completions.create({ model, messages: q, max_tokens: 80, seed: 4, structured_outputs: { json: schema, disable_any_whitespace: true } });
check(!/\s/.test(jsStruct.choices[0].message.content) && JSON.parse(jsStruct.choices[0].message.content).n >= 1, "structured_outputs.json without whitespace", jsStruct.choices[0].message.content);
const jo = await client.chat.completions.create({ model, messages: q, max_tokens: 300, seed: 2, response_format: { type: "json_object" } });
if (jo.choices[0].finish_reason === "stop") {
  const v = JSON.parse(jo.choices[0].message.content);
  check(v !== null && typeof v === "object" && !Array.isArray(v), "json_object output is an object", jo.choices[0].message.content);
} else {
  check(/^\s*\{/.test(jo.choices[0].message.content), "json_object output starts an object", jo.choices[0].message.content);
}
const gbnf = 'root ::= answer "."\nanswer ::= "yes" | "no" | "maybe"\n';
const gr = await client.chat.completions.create({ model, messages: q, max_tokens: 10, seed: 3, structured_outputs: { grammar: gbnf } });
check(["yes.", "no.", "maybe."].includes(gr.choices[0].message.content), "GBNF grammar output", gr.choices[0].message.content);
const rec = await client.chat.completions.create({ model, messages: q, max_tokens: 40, seed: 5, structured_outputs: { grammar: 'root ::= "(" root ")" | "x"' } });
{
  const out = rec.choices[0].message.content, opens = out.split("(").length - 1, closes = out.split(")").length - 1;
  if (rec.choices[0].finish_reason === "stop") {
    check(/^(\(*)x(\)*)$/.test(out) && opens === closes, "recursive grammar (pushdown) gives balanced output", out);
  } else {
    // Cut by max_tokens: a prefix of a balanced word.
    check(rec.choices[0].finish_reason === "length" && /^\(*(x\)*)?$/.test(out) && closes <= opens, "recursive grammar cut by length is a valid prefix", rec.choices[0]);
  }
}
await expectError(400, { structured_outputs: { grammar: 'root ::= missing' } }, "grammar with an undefined rule", "structured_outputs.grammar");
const txt = await client.chat.completions.create({ model, messages: q, max_tokens: 5, response_format: { type: "text" } });
check(typeof txt.choices[0].message.content === "string", "response_format text", txt.choices[0]);
await expectError(400, { structured_outputs: { regex: 5 } }, "structured_outputs.regex not a string", "structured_outputs.regex");
await expectError(400, { response_format: { type: "json_schema" } }, "json_schema without schema", "response_format.json_schema");
await expectError(400, { structured_outputs: { regex: "a", choice: ["b"] } }, "two constraint kinds", "structured_outputs");
await expectError(400, { structured_outputs: { json: { type: "object", properties: { a: { type: "number", multipleOf: 2 } } } } }, "unsupported schema feature", "structured_outputs.json");

// Tool calls. The demo model has random weights and a hermes-style template; with
// tool_choice required or a named function the call is generated under the tools' schemas,
// so it always parses.
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather of a city", parameters: { type: "object", properties: { city: { enum: ["Paris", "Rome"] }, days: { type: "integer", minimum: 1, maximum: 7 } }, required: ["city", "days"], additionalProperties: false } } },
  { type: "function", function: { name: "get_time", parameters: { type: "object", properties: { zone: { enum: ["UTC", "CET"] } }, required: ["zone"], additionalProperties: false } } },
];
const checkCall = (call, what) => {
  check(call.type === "function" && /^call_[A-Za-z0-9]{24}$/.test(call.id), `${what}: call id and type`, call);
  check(["get_weather", "get_time"].includes(call.function.name), `${what}: known function`, call);
  const args = JSON.parse(call.function.arguments);
  if (call.function.name === "get_weather") check(["Paris", "Rome"].includes(args.city) && Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, `${what}: get_weather arguments`, args);
  else check(["UTC", "CET"].includes(args.zone), `${what}: get_time arguments`, args);
};
const askWeather = [{ role: "user", content: "What is the weather in Paris for 3 days?" }];
const req = await client.chat.completions.create({ model, messages: askWeather, tools, tool_choice: "required", max_tokens: 120, seed: 4 });
check(req.choices[0].finish_reason === "tool_calls" && req.choices[0].message.tool_calls?.length >= 1 && req.choices[0].message.content === null, "required: tool_calls, null content", req.choices[0]);
req.choices[0].message.tool_calls.forEach((c) => checkCall(c, "required"));
// Streamed through the SDK's stream helper, which adds the tool_call deltas up.
const helper = client.chat.completions.stream({ model, messages: askWeather, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 120, seed: 5 });
let argDeltas = 0;
helper.on("tool_calls.function.arguments.delta", () => argDeltas++);
const streamed = await helper.finalChatCompletion();
const sm = streamed.choices[0].message;
check(sm.tool_calls?.length === 1 && sm.tool_calls[0].function.name === "get_weather" && !sm.content, "named, streamed: one get_weather call", sm);
checkCall(sm.tool_calls[0], "named, streamed");
check(argDeltas >= 1, "named, streamed: argument deltas", argDeltas);
const named = await client.chat.completions.create({ model, messages: askWeather, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 120, seed: 5 });
check(named.choices[0].message.tool_calls[0].function.arguments === sm.tool_calls[0].function.arguments, "named: streamed and non-streamed arguments agree", [named.choices[0].message, sm]);
// The tool's result in a follow-up turn.
const call = req.choices[0].message.tool_calls[0];
const followUp = await client.chat.completions.create({ model, tools, max_tokens: 4, messages: [...askWeather, req.choices[0].message, { role: "tool", tool_call_id: call.id, content: "sunny, 21 C" }] });
check(followUp.choices.length === 1, "follow-up turn with the tool result", followUp);
const noneChoice = await client.chat.completions.create({ model, messages: askWeather, tools, tool_choice: "none", max_tokens: 4 });
check(!noneChoice.choices[0].message.tool_calls, "tool_choice none: no tool_calls", noneChoice.choices[0].message);

// Error cases, each in the one error envelope.
await expectError(404, { model: "no-such-model" }, "unknown model");
await expectError(400, { temperature: -1 }, "negative temperature", "temperature");
await expectError(400, { n: 0 }, "n = 0", "n");
await expectError(400, { max_tokens: 0 }, "max_tokens = 0", "max_tokens");
await expectError(400, { top_p: 1.5 }, "top_p > 1", "top_p");
await expectError(400, { priority: 5 }, "priority under fcfs");
await expectError(400, { tool_choice: "required" }, "tool_choice without tools", "tool_choice");
await expectError(400, { tool_choice: { type: "function", function: { name: "nope" } }, tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] }, "named tool not in tools", "tool_choice");
await expectError(400, { tools: [] }, "empty tools", "tools");
await expectError(400, { add_generation_prompt: true, continue_final_message: true }, "continue_final_message with add_generation_prompt");
await expectError(400, { stream_options: { include_usage: true } }, "stream_options without stream", "stream_options");
await expectError(400, { seed: -(2 ** 63) - 4096 }, "seed out of range", "seed");
await expectError(400, { truncate_prompt_tokens: -2 }, "truncate_prompt_tokens -2", "truncate_prompt_tokens");

// Text completions (client.completions): text and logprobs, echo scoring a text, a stream.
const tc = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, logprobs: 1 });
check(tc.object === "text_completion" && tc.choices[0].logprobs.tokens.join("") === tc.choices[0].text, "completions: tokens make the text", tc);
const scored = await client.completions.create({ model, prompt: "Once upon a time" + tc.choices[0].text, max_tokens: 1, temperature: 0, echo: true, logprobs: 1 });
const slp = scored.choices[0].logprobs;
check(slp.token_logprobs[0] === null && scored.choices[0].text.startsWith("Once upon a time"), "completions: echo with the prompt's logprobs", slp);
let streamedText = "";
for await (const chunk of await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 5, temperature: 0, stream: true })) {
  streamedText += chunk.choices.map((c) => c.text).join("");
}
check(streamedText === tc.choices[0].text, "completions: a stream adds up to the text", streamedText);
try {
  await client.completions.create({ model, prompt: "x", suffix: "y" });
  check(false, "completions: suffix refused");
} catch (e) {
  check(e instanceof OpenAI.BadRequestError && e.param === "suffix", "completions: suffix is a 400 naming it", e);
}

// Raw HTTP: malformed JSON is a 400 in the same envelope.
const raw = await fetch(process.env.HONE_URL + "/v1/chat/completions", {
  method: "POST", headers: { "Content-Type": "application/json", Authorization: "Bearer " + process.env.HONE_KEY }, body: "{not json",
});
const rawBody = await raw.json();
check(raw.status === 400 && rawBody.error && rawBody.error.code === 400, "malformed JSON envelope", rawBody);

console.log(JSON.stringify({ ok: true, checks }));
