// Playground: chat with a served model or a trained checkpoint, streamed (with a stop button,
// tokens and latency per reply), with the sampling parameters, response_format and tools of the
// chat API; messages edited and replies regenerated; two models side by side on the same
// conversation; replies traced into a project of the user's choice; a traced chat call opened
// here (?call=); the request as curl and as Python.
import { v1, tr, sse } from './api.js';
import { h, clear, errorBox, fmtMs, plural, spinner } from './dom.js';
import { setQuery, projectList, projectsLoaded, project } from './app.js';
import { conversation } from './call.js';

const TRACE = 'X-Hone-Trace-Project';

// modelChoices lists what chat can serve: the served base models, and the trainable models as
// <entity>/<project>/<name> (their latest checkpoint).
async function modelChoices() {
  const [served, trained] = await Promise.all([v1('GET', '/v1/models'), v1('GET', '/v1/preview/models?limit=100').catch(() => ({ data: [] }))]);
  return {
    served: served.data.map((m) => m.id),
    trained: trained.data.map((m) => `${m.entity}/${m.project}/${m.name}`),
  };
}

export async function playgroundView(root, _params, q) {
  const [choices, fromCall] = await Promise.all([modelChoices(), q.get('call') ? loadCall(q.get('call')) : null, projectsLoaded()]);
  const all = [...choices.served, ...choices.trained];
  const want = q.get('model') || (fromCall && fromCall.model) || '';
  const options = (sel) => {
    const extra = sel && !all.includes(sel) ? [sel] : [];
    return [
      extra.length ? h('optgroup', { label: 'Asked for' }, extra.map((n) => h('option', { value: n, selected: true }, n))) : '',
      h('optgroup', { label: 'Served models' }, choices.served.map((n) => h('option', { value: n, selected: n === sel }, n))),
      choices.trained.length ? h('optgroup', { label: 'Trained (latest checkpoint; :stepN for another)' }, choices.trained.map((n) => h('option', { value: n, selected: n === sel }, n))) : '',
    ];
  };
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
  // Where replies are traced: no project, or one of the entity's (the header the chat API reads).
  const here = project().project ? `${project().entity}/${project().project}` : '';
  const traceSel = h('select#pg-trace', { 'aria-label': 'Trace replies into', onchange: () => { localStorage.setItem('hone.pg.trace', traceSel.value); code(); } });
  const fillTrace = () => {
    const saved = localStorage.getItem('hone.pg.trace') ?? '';
    const ps = [...new Set([...projectList(), ...(here ? [here] : []), ...(saved ? [saved] : [])])].sort();
    clear(traceSel, h('option', { value: '' }, 'not traced'), ps.map((p) => h('option', { value: p, selected: p === saved }, 'traced into ' + p)));
  };
  fillTrace();

  const input = h('textarea#pg-input', { rows: 3, placeholder: 'Message (Ctrl+Enter sends)', 'aria-label': 'Message',
    onkeydown: (e) => { if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) { e.preventDefault(); sendAll(); } } });
  const curl = h('pre.code#pg-curl');
  const py = h('pre.code#pg-python');
  const sendBtn = h('button.primary#pg-send', { type: 'button', onclick: () => sendAll() }, 'Send');
  const stopBtn = h('button.danger#pg-stop', { type: 'button', hidden: true, onclick: () => { for (const p of panes) p.stop(); } }, 'Stop');
  const compareBox = h('input#pg-compare', { type: 'checkbox', onchange: () => { setCompare(compareBox.checked); } });

  function request(p, extra) {
    const body = { model: p.model.value, messages: [...(system.value.trim() ? [{ role: 'system', content: system.value.trim() }] : []),
      ...p.messages.map(({ meta, ...m }) => m), ...(extra ? [extra] : [])], stream: true, stream_options: { include_usage: true } };
    for (const el of params.querySelectorAll('input')) if (el.value !== '') body[el.name] = Number(el.value);
    if (fmt.value === 'json_object') body.response_format = { type: 'json_object' };
    if (fmt.value === 'json_schema') body.response_format = { type: 'json_schema', json_schema: { name: 'answer', schema: JSON.parse(schema.value || '{}') } };
    if (tools.value.trim()) body.tools = JSON.parse(tools.value);
    if (body.tools && toolChoice.value !== 'auto') body.tool_choice = toolChoice.value;
    return body;
  }

  // A pane is one model's conversation: its model, messages, and the reply streaming into it.
  class Pane {
    constructor(i, model) {
      this.i = i;
      this.messages = [];
      this.ctl = null;
      this.model = h('select' + (i === 0 ? '#pg-model' : '#pg-model-b'), { 'aria-label': i === 0 ? 'Model' : 'Second model', onchange: () => { if (i === 0) setQuery({ model: this.model.value }); code(); } }, options(model));
      this.chat = h('div.pgchat' + (i === 0 ? '#pg-chat' : '#pg-chat-b'), { 'aria-live': 'polite' });
      this.status = h('div.pgstatus');
      this.el = h('section.pane', {}, h('div.pgrow', {}, this.model, h('button' + (i === 0 ? '#pg-clear' : ''), { type: 'button', title: 'Start a new conversation', onclick: () => { this.messages.length = 0; clear(this.status); this.draw(); code(); } }, 'Clear')), this.chat, this.status);
      this.draw();
    }
    draw() {
      // Kept scrolled to the end while the reply grows, unless the user scrolled up.
      const atEnd = this.chat.scrollHeight - this.chat.scrollTop - this.chat.clientHeight < 40;
      queueMicrotask(() => { if (atEnd) this.chat.scrollTop = this.chat.scrollHeight; });
      if (!this.messages.length) { clear(this.chat, h('p.muted.pgempty', {}, 'Send a message to start. Replies stream here; edit a message or regenerate a reply with the buttons beside it.')); return; }
      clear(this.chat, conversation(this.messages, { actions: (m, i) => (this.ctl ? '' : h('span.msgactions', {},
        m.role !== 'assistant' || i === this.messages.length - 1 ? h('button.link.edit', { type: 'button', title: 'Edit this message', onclick: () => this.edit(i) }, 'edit') : '',
        m.role === 'assistant' ? h('button.link.regen', { type: 'button', title: 'Generate this reply again', onclick: () => this.regenerate(i) }, 'regenerate') : '')) }));
    }
    edit(i) {
      const m = this.messages[i];
      const ta = h('textarea.editbox', { rows: 3, value: typeof m.content === 'string' ? m.content : JSON.stringify(m.content), 'aria-label': 'Edit message' });
      const box = this.chat.querySelector(`.msg[data-i="${i}"]`);
      const save = (regen) => {
        m.content = ta.value;
        delete m.meta;
        // An edited message replaces the conversation's course from there on.
        if (regen) { this.messages.length = i + 1; this.generate(); } else this.draw();
        code();
      };
      clear(box, h('div.role', {}, m.role), ta, h('div.pgrow', {},
        m.role === 'user' ? h('button.primary.save-regen', { type: 'button', onclick: () => save(true) }, 'Save and regenerate') : '',
        h('button.save', { type: 'button', onclick: () => save(false) }, 'Save'), h('button', { type: 'button', onclick: () => this.draw() }, 'Cancel')));
      ta.focus();
    }
    regenerate(i) { this.messages.length = i; this.generate(); }
    stop() { if (this.ctl) this.ctl.abort(); }
    async send(text) {
      this.messages.push({ role: 'user', content: text });
      return this.generate();
    }
    // generate streams a reply to the conversation as it is.
    async generate() {
      let body;
      try { body = request(this); } catch (e) { clear(this.status, errorBox('Invalid JSON: ' + e.message)); return; }
      const reply = { role: 'assistant', content: '' };
      this.messages.push(reply);
      this.ctl = new AbortController();
      this.draw();
      clear(this.status, spinner('streaming…'));
      const t0 = performance.now();
      let first = 0;
      let usage = null;
      const calls = {};
      const headers = traceSel.value ? { [TRACE]: traceSel.value } : {};
      let stopped = false;
      let chunks = 0;
      try {
        await sse('/v1/chat/completions', body, (e) => {
          if (e.data === '[DONE]') return;
          const chunk = JSON.parse(e.data);
          this.chat.dataset.chunks = String(++chunks); // drawn one by one as they arrive
          if (chunk.usage) usage = chunk.usage;
          const d = chunk.choices && chunk.choices[0] && chunk.choices[0].delta;
          if (d && (d.content || d.reasoning || d.tool_calls) && !first) first = performance.now() - t0;
          if (d && d.content) reply.content += d.content;
          const r = d && (d.reasoning || d.reasoning_content); // Hone's and vLLM's field, and its older name
          if (r) reply.reasoning = (reply.reasoning || '') + r;
          if (d && d.tool_calls) for (const t of d.tool_calls) {
            const c = (calls[t.index] ||= { id: t.id, type: 'function', function: { name: '', arguments: '' } });
            if (t.function && t.function.name) c.function.name += t.function.name;
            if (t.function && t.function.arguments) c.function.arguments += t.function.arguments;
            reply.tool_calls = Object.values(calls);
          }
          this.draw();
        }, this.ctl.signal, headers);
      } catch (e) {
        if (e.name === 'AbortError') stopped = true;
        else {
          this.messages.pop();
          this.ctl = null;
          clear(this.status, errorBox(e));
          this.draw();
          return;
        }
      }
      const total = performance.now() - t0;
      reply.meta = [usage ? `${plural(usage.completion_tokens, 'token')} (prompt ${usage.prompt_tokens})` : '', `${fmtMs(total)}`,
        first ? `first token ${fmtMs(first)}` : '', usage && total > 0 ? `${(usage.completion_tokens / (total / 1000)).toFixed(1)} tokens/s` : '',
        stopped ? 'stopped' : '', traceSel.value ? `traced into ${traceSel.value}` : ''].filter(Boolean).join(' · ');
      this.ctl = null;
      clear(this.status, h('span.muted.pg-done', { id: this.i === 0 ? 'pg-done' : 'pg-done-b' }, stopped ? 'stopped' : 'done'));
      this.draw();
    }
  }

  let panes = [new Pane(0, want || choices.served[0] || '')];
  const panesEl = h('div.panes');
  function setCompare(on) {
    if (on && panes.length === 1) {
      const other = all.find((n) => n !== panes[0].model.value) || panes[0].model.value;
      const b = new Pane(1, q.get('model_b') || other);
      b.messages = panes[0].messages.map((m) => ({ ...m }));
      b.draw();
      panes.push(b);
    } else if (!on && panes.length === 2) panes.pop();
    compareBox.checked = on;
    panesEl.classList.toggle('two', panes.length === 2);
    clear(panesEl, panes.map((p) => p.el));
    setQuery({ compare: on ? '1' : '' });
  }
  async function sendAll() {
    const text = input.value.trim();
    const last = panes[0].messages[panes[0].messages.length - 1];
    if (!text && !(last && last.role === 'user')) return;
    input.value = '';
    sendBtn.disabled = true;
    stopBtn.hidden = false;
    await Promise.all(panes.map((p) => (text ? p.send(text) : p.generate())));
    sendBtn.disabled = false;
    stopBtn.hidden = true;
    code();
  }

  function code() {
    let body;
    const p = panes[0];
    try { body = request(p, input.value.trim() ? { role: 'user', content: input.value.trim() } : undefined); } catch (e) { curl.textContent = py.textContent = 'Invalid JSON: ' + e.message; return; }
    const json = JSON.stringify(body, null, 2);
    const trace = traceSel.value ? `  -H "${TRACE}: ${traceSel.value}" \\\n` : '';
    curl.textContent = `curl ${location.origin}/v1/chat/completions \\\n  -H "Authorization: Bearer $HONE_API_KEY" \\\n  -H "Content-Type: application/json" \\\n${trace}  -d '${json.replace(/'/g, "'\\''")}'`;
    const { model: m, messages: msgs, stream, stream_options: so, ...rest } = body;
    const kw = Object.entries(rest).map(([k, v]) => `    ${k}=${pyVal(v)},\n`).join('');
    const hdr = traceSel.value ? `, default_headers={"${TRACE}": "${traceSel.value}"}` : '';
    py.textContent = `import os\nfrom openai import OpenAI\n\nclient = OpenAI(base_url="${location.origin}/v1", api_key=os.environ["HONE_API_KEY"]${hdr})\nstream = client.chat.completions.create(\n    model=${pyVal(m)},\n    messages=${pyVal(msgs)},\n    stream=True,\n${kw})\nfor chunk in stream:\n    if chunk.choices and chunk.choices[0].delta.content:\n        print(chunk.choices[0].delta.content, end="", flush=True)\n`;
  }
  input.addEventListener('input', code);

  // A traced chat call opened here: its messages (the system prompt apart), model and settings.
  if (fromCall) {
    const msgs = [...fromCall.messages];
    const sys = msgs[0] && msgs[0].role === 'system' && typeof msgs[0].content === 'string' ? msgs.shift() : null;
    if (sys) system.value = sys.content;
    panes[0].messages = msgs;
    for (const el of params.querySelectorAll('input')) if (fromCall.params[el.name] !== undefined && typeof fromCall.params[el.name] === 'number') el.value = fromCall.params[el.name];
    if (fromCall.params.tools) tools.value = JSON.stringify(fromCall.params.tools);
    if (typeof fromCall.params.tool_choice === 'string') toolChoice.value = fromCall.params.tool_choice;
    if (fromCall.params.response_format && ['json_object', 'json_schema'].includes(fromCall.params.response_format.type)) {
      fmt.value = fromCall.params.response_format.type;
      if (fmt.value === 'json_schema' && fromCall.params.response_format.json_schema) { schema.value = JSON.stringify(fromCall.params.response_format.json_schema.schema || {}); schema.hidden = false; }
    }
    panes[0].draw();
  }

  root.append(h('h1', {}, 'Playground'),
    fromCall ? h('p.muted#pg-from', {}, 'Opened from the call ', h('a', { href: fromCall.href }, fromCall.name), ': edit the messages, then Send to generate the reply again.') : '',
    h('div.playground', {},
      h('div.pgmain', {}, h('div.pgrow.wrap', {}, h('label.toggle', {}, compareBox, ' compare two models side by side'), traceSel), system, panesEl, input,
        h('div.pgrow', {}, sendBtn, stopBtn, h('span.muted', {}, 'Ctrl+Enter sends; with the last message from the user, Send with an empty box generates the reply'))),
      h('aside.pgside', {}, h('h3', {}, 'Sampling'), params, fmt, schema, h('h3', {}, 'Tools'), tools, toolChoice,
        h('h3', {}, 'curl'), curl, h('h3', {}, 'Python (openai)'), py)));
  setCompare(q.get('compare') === '1');
  code();
}

// loadCall reads a traced chat completion (<entity>/<project>/<id>) for the playground.
async function loadCall(ref) {
  const i = ref.lastIndexOf('/');
  const pid = ref.slice(0, i), id = ref.slice(i + 1);
  const { call } = await tr('/call/read', { project_id: pid, id });
  if (!call) throw Object.assign(new Error(`There is no call ${id} in ${pid} to open in the playground.`), { status: 404 });
  const inp = call.inputs || {};
  if (!Array.isArray(inp.messages)) throw new Error(`The call ${id} is not a chat completion (its inputs have no messages).`);
  const { messages, model, stream, stream_options: so, ...params } = inp;
  const [e, p] = pid.split('/');
  return { messages: messages.map((m) => ({ ...m })), model: typeof model === 'string' ? model : '', params, href: `/${encodeURIComponent(e)}/${encodeURIComponent(p)}/weave/calls/${encodeURIComponent(id)}`, name: call.display_name || id.slice(-12) };
}

function pyVal(v) {
  if (v === null) return 'None';
  if (v === true) return 'True';
  if (v === false) return 'False';
  if (Array.isArray(v)) return '[' + v.map(pyVal).join(', ') + ']';
  if (typeof v === 'object') return '{' + Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyVal(x)}`).join(', ') + '}';
  return JSON.stringify(v);
}
