// Playground: chat with a served model or a trained checkpoint, streamed, with the sampling
// parameters, response_format and tools of the chat API; the request as curl and as Python.
import { v1, sse } from './api.js';
import { h, clear, errorBox } from './dom.js';
import { setQuery } from './app.js';
import { conversation } from './traces.js';

export async function playgroundView(root, _params, q) {
  const [served, trained] = await Promise.all([v1('GET', '/v1/models'), v1('GET', '/v1/preview/models?limit=100').catch(() => ({ data: [] }))]);
  const names = [...served.data.map((m) => m.id), ...trained.data.map((m) => m.id)];
  const want = q.get('model');
  if (want && !names.includes(want)) names.unshift(want);
  const messages = [];
  const model = h('select#pg-model', { 'aria-label': 'Model', onchange: () => { setQuery({ model: model.value }); code(); } }, names.map((n) => h('option', { value: n, selected: n === (want || names[0]) }, n)));
  const num = (name, value, attrs) => h('label', {}, name, h('input', { type: 'number', name, value, step: 'any', ...attrs, oninput: () => code() }));
  const params = h('div.params', {},
    num('temperature', '0.7', { min: 0, max: 2 }), num('top_p', '1', { min: 0, max: 1 }), num('max_tokens', '128', { min: 1, step: 1 }),
    num('seed', '', { step: 1 }), num('min_tokens', '', { min: 0, step: 1 }), num('presence_penalty', '', {}), num('frequency_penalty', '', {}));
  const system = h('textarea', { rows: 2, placeholder: 'System prompt (optional)', 'aria-label': 'System prompt', oninput: () => code() });
  const fmt = h('select', { 'aria-label': 'Response format', onchange: () => { schema.hidden = fmt.value !== 'json_schema'; code(); } },
    ['text', 'json_object', 'json_schema'].map((x) => h('option', { value: x }, 'response_format: ' + x)));
  const schema = h('textarea', { rows: 4, hidden: true, 'aria-label': 'JSON schema', value: '{"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}', oninput: () => code() });
  const tools = h('textarea', { rows: 3, 'aria-label': 'Tools', placeholder: 'tools: [{"type": "function", "function": {"name": "get_weather", "parameters": {...}}}]', oninput: () => code() });
  const toolChoice = h('select', { 'aria-label': 'Tool choice', onchange: () => code() }, ['auto', 'required', 'none'].map((x) => h('option', { value: x }, 'tool_choice: ' + x)));
  const chatEl = h('div#pg-chat');
  const input = h('textarea#pg-input', { rows: 3, placeholder: 'Message (Ctrl+Enter sends)', 'aria-label': 'Message',
    onkeydown: (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); send(); } } });
  const status = h('div');
  const curl = h('pre.code#pg-curl');
  const py = h('pre.code#pg-python');
  const sendBtn = h('button.primary#pg-send', { onclick: () => send() }, 'Send');

  function request(extra) {
    const body = { model: model.value, messages: [...(system.value.trim() ? [{ role: 'system', content: system.value.trim() }] : []), ...messages, ...(extra ? [extra] : [])], stream: true };
    for (const el of params.querySelectorAll('input')) if (el.value !== '') body[el.name] = Number(el.value);
    if (fmt.value === 'json_object') body.response_format = { type: 'json_object' };
    if (fmt.value === 'json_schema') body.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: JSON.parse(schema.value || '{}') } };
    if (tools.value.trim()) body.tools = JSON.parse(tools.value);
    if (body.tools && toolChoice.value !== 'auto') body.tool_choice = toolChoice.value;
    return body;
  }
  function code() {
    let body;
    try { body = request(input.value.trim() ? { role: 'user', content: input.value.trim() } : undefined); } catch (e) { curl.textContent = py.textContent = 'Invalid JSON: ' + e.message; return; }
    const json = JSON.stringify(body, null, 2);
    curl.textContent = `curl ${location.origin}/v1/chat/completions \\\n  -H "Authorization: Bearer $HONE_API_KEY" \\\n  -H "Content-Type: application/json" \\\n  -d '${json.replace(/'/g, "'\\''")}'`;
    const { model: m, messages: msgs, stream, ...rest } = body;
    const kw = Object.entries(rest).map(([k, v]) => `    ${k}=${pyVal(v)},\n`).join('');
    py.textContent = `from openai import OpenAI\n\nclient = OpenAI(base_url="${location.origin}/v1", api_key=os.environ["HONE_API_KEY"])\nstream = client.chat.completions.create(\n    model=${pyVal(m)},\n    messages=${pyVal(msgs)},\n    stream=True,\n${kw})\nfor chunk in stream:\n    if chunk.choices and chunk.choices[0].delta.content:\n        print(chunk.choices[0].delta.content, end="", flush=True)\n`.replace('from openai', 'import os\nfrom openai');
  }
  input.addEventListener('input', code);

  async function send() {
    const text = input.value.trim();
    if (!text) return;
    let body;
    try { body = request({ role: 'user', content: text }); } catch (e) { clear(status, errorBox('Invalid JSON: ' + e.message)); return; }
    messages.push({ role: 'user', content: text });
    input.value = '';
    const reply = { role: 'assistant', content: '' };
    messages.push(reply);
    const draw = () => clear(chatEl, conversation(messages));
    draw();
    clear(status, h('span.muted', {}, 'streaming…'));
    sendBtn.disabled = true;
    const calls = {};
    try {
      await sse('/v1/chat/completions', body, (e) => {
        if (e.data === '[DONE]') return;
        const chunk = JSON.parse(e.data);
        const d = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
        if (d && d.content) reply.content += d.content;
        const r = d && (d.reasoning || d.reasoning_content); // Hone's and vLLM's field, and its older name
        if (r) reply.reasoning = (reply.reasoning || '') + r;
        if (d && d.tool_calls) for (const t of d.tool_calls) {
          const c = (calls[t.index] ||= { id: t.id, type: 'function', function: { name: '', arguments: '' } });
          if (t.function && t.function.name) c.function.name += t.function.name;
          if (t.function && t.function.arguments) c.function.arguments += t.function.arguments;
          reply.tool_calls = Object.values(calls);
        }
        draw();
      });
      clear(status, h('span.muted#pg-done', {}, 'done'));
    } catch (e) {
      messages.pop();
      clear(status, errorBox(e));
    } finally { sendBtn.disabled = false; draw(); code(); }
  }

  root.append(h('h1', {}, 'Playground'),
    h('div.playground', {},
      h('div.pgmain', {}, h('div.pgrow', {}, model, h('button', { onclick: () => { messages.length = 0; clear(chatEl); code(); } }, 'Clear')), system, chatEl, input, h('div.pgrow', {}, sendBtn, status)),
      h('aside.pgside', {}, h('h3', {}, 'Sampling'), params, fmt, schema, h('h3', {}, 'Tools'), tools, toolChoice,
        h('h3', {}, 'curl'), curl, h('h3', {}, 'Python (openai)'), py)));
  code();
}

function pyVal(v) {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (Array.isArray(v)) return '[' + v.map(pyVal).join(', ') + ']';
  if (typeof v === 'object') return '{' + Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyVal(x)}`).join(', ') + '}';
  return JSON.stringify(v);
}
