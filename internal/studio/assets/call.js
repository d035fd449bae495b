// The call page: a call in its trace. The trace tree (virtualised, keyboard) with a timeline of
// latency bars beside it and a search within the trace; the selected call's inputs and output
// (collapsible JSON, chat messages as a conversation in Markdown, copy buttons, "open in
// playground"), its exception (the Python SDK's JSON as a message and frames), usage and cost
// of its subtree, feedback, and a rename.
import { calls, tr, session } from './api.js';
import { h, clear, enc, jsonView, markdown, fmtTime, fmtMs, fmtNum, fmtCost, usageTotals, errorBox, loading, plural, copyButton, confirmDialog, promptDialog, toast, emptyState } from './dom.js';
import { projectBase } from './app.js';
import { opName, statusOf, latencyOf, statusBadge, parseException, REACTION, NOTE } from './traces.js';

const ROW = 26;

export async function callView(root, [entity, project, id]) {
  const pid = `${entity}/${project}`;
  const t0 = performance.now();
  const { call } = await tr('/call/read', { project_id: pid, id, include_costs: true });
  if (!call) {
    root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave` }, 'Traces'), ' / ', h('code', {}, id)),
      errorBox(Object.assign(new Error(`There is no call ${id} in ${pid}.`), { status: 404 })),
      h('p', {}, h('a', { href: `${projectBase()}/weave` }, 'Open the project\'s calls')));
    return;
  }
  // The trace's calls (without inputs and outputs) and its usage roll-up, at once. The usage
  // route refuses more than its limit of calls rather than truncate: the tree shows without.
  // The tree is drawn from the calls read so far while the rest arrive (in start order, so a
  // call's parent is there before it), and again when all are in.
  let trace = [call];
  let rolled = {};
  let byId = new Map(), roots = [], tStart = 0, tEnd = 1, complete = false;
  const open = new Set();
  const closed = new Set(); // roots the user collapsed
  const openPath = (cid) => { for (let n = byId.get(cid); n && n.c.parent_id; n = byId.get(n.c.parent_id)) open.add(n.c.parent_id); };
  function build() {
    // Tree: children in start order; a call whose parent is not in the trace is a root.
    byId = new Map(trace.map((c) => [c.id, { c, kids: [], depth: 0, s: Date.parse(c.started_at), e: c.ended_at ? Date.parse(c.ended_at) : NaN }]));
    roots = [];
    for (const n of byId.values()) {
      const p = n.c.parent_id && byId.get(n.c.parent_id);
      (p ? p.kids : roots).push(n);
    }
    const stack = roots.map((n) => [n, 0]);
    while (stack.length) { const [n, d] = stack.pop(); n.depth = d; for (const k of n.kids) stack.push([k, d + 1]); }
    // The timeline's span: the trace's first start to its last end (a running call to now).
    tStart = Infinity; tEnd = -Infinity;
    for (const n of byId.values()) { tStart = Math.min(tStart, n.s); tEnd = Math.max(tEnd, isNaN(n.e) ? n.s : n.e); }
    if (!(tEnd > tStart)) tEnd = tStart + 1;
    // Open: the roots, and the path down to the call this page is about; every call with
    // children after "Expand all" (those that arrive later too).
    for (const r of roots) if (!closed.has(r.c.id)) open.add(r.c.id);
    if (expandAll) for (const n of byId.values()) if (n.kids.length && !closed.has(n.c.id)) open.add(n.c.id);
    openPath(id);
  }
  let expandAll = false;
  build();
  let selected = id;
  let matches = null; // ids matching the trace search, or null

  const visible = () => {
    const out = [];
    const st = [...roots].reverse();
    while (st.length) {
      const n = st.pop();
      out.push(n);
      if (open.has(n.c.id)) for (let i = n.kids.length - 1; i >= 0; i--) st.push(n.kids[i]);
    }
    return out;
  };

  const viewport = h('div.tree', { tabIndex: 0, role: 'tree', 'aria-label': 'Trace tree: arrows or j and k move, left and right collapse and expand' });
  const spacer = h('div.spacer-v');
  viewport.append(spacer);
  let rows = visible();
  const detail = h('section.detail', { 'aria-label': 'Selected call' });
  let timeline = localStorage.getItem('hone.timeline') !== '0';

  function drawTree() {
    spacer.style.height = rows.length * ROW + 'px';
    viewport.classList.toggle('timeline', timeline);
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW) - 10);
    const last = Math.min(rows.length, first + Math.ceil((viewport.clientHeight || 600) / ROW) + 20);
    const frag = [];
    const span = tEnd - tStart;
    for (let i = first; i < last; i++) {
      const n = rows[i];
      const c = n.c;
      const u = usageTotals(rolled[c.id] || (c.summary && c.summary.usage));
      const isOpen = open.has(c.id);
      const end = isNaN(n.e) ? tEnd : n.e;
      frag.push(h('div.node' + (c.id === selected ? '.sel' : '') + (c.exception ? '.exc' : '') + (matches && matches.has(c.id) ? '.match' : ''), {
        role: 'treeitem', 'aria-expanded': n.kids.length ? String(isOpen) : undefined, 'aria-selected': String(c.id === selected), 'aria-level': n.depth + 1, 'data-id': c.id,
        style: { top: i * ROW + 'px', paddingLeft: 8 + n.depth * 16 + 'px' },
        onclick: () => select(c.id),
      },
      n.kids.length ? h('button.tog', { type: 'button', tabIndex: -1, 'aria-label': isOpen ? 'Collapse' : 'Expand', onclick: (e) => { e.stopPropagation(); toggle(c.id); } }, isOpen ? '▾' : '▸') : h('span.tog'),
      h('span.dot.st-' + statusOf(c)),
      h('span.op', {}, c.display_name || opName(c.op_name)),
      n.kids.length ? h('span.muted.kids', {}, ` (${n.kids.length})`) : '',
      h('span.spacer'),
      u.tokens ? h('span.muted.tok', { title: 'tokens, this call and below' }, fmtNum(u.tokens) + ' tok ') : '',
      h('span.muted.lat', {}, fmtMs(latencyOf(c))),
      timeline ? h('span.bar', { 'aria-hidden': 'true' }, h('span.fill.st-' + statusOf(c), {
        style: { left: (100 * (n.s - tStart) / span) + '%', width: Math.max(0.4, 100 * (end - n.s) / span) + '%' },
        title: `starts at +${fmtMs(n.s - tStart)}, lasts ${fmtMs(end - n.s)}` })) : ''));
    }
    viewport.replaceChildren(spacer, ...frag);
  }
  function toggle(cid) {
    if (open.has(cid)) { open.delete(cid); closed.add(cid); } else { open.add(cid); closed.delete(cid); }
    rows = visible();
    drawTree();
  }
  function scrollTo(cid) {
    const y = rows.findIndex((m) => m.c.id === cid) * ROW;
    if (y >= 0 && (y < viewport.scrollTop || y > viewport.scrollTop + viewport.clientHeight - ROW)) viewport.scrollTop = y - viewport.clientHeight / 2;
  }
  async function select(cid) {
    // A view the user has left (another one rendered over it while this one loaded) must not
    // put its own path back in the address bar.
    if (!root.isConnected) return;
    selected = cid;
    history.replaceState(null, '', `${projectBase()}/weave/calls/${enc(cid)}`);
    drawTree();
    await loading(detail, async () => {
      const r = cid === call.id ? { call } : await tr('/call/read', { project_id: pid, id: cid, include_costs: true });
      if (!r.call) throw Object.assign(new Error(`The call ${cid} is gone (deleted since the trace was read).`), { status: 404 });
      return callDetail(pid, r.call, rolled[cid]);
    }, 'Loading the call…');
  }
  viewport.addEventListener('scroll', () => requestAnimationFrame(drawTree));
  viewport.addEventListener('keydown', (e) => {
    const i = rows.findIndex((n) => n.c.id === selected);
    const n = rows[i];
    if (e.key === 'ArrowDown' || e.key === 'j') { if (i + 1 < rows.length) select(rows[i + 1].c.id); }
    else if (e.key === 'ArrowUp' || e.key === 'k') { if (i > 0) select(rows[i - 1].c.id); }
    else if (e.key === 'ArrowRight' && n && n.kids.length && !open.has(n.c.id)) toggle(n.c.id);
    else if (e.key === 'ArrowLeft' && n && open.has(n.c.id)) toggle(n.c.id);
    else return;
    e.preventDefault();
    scrollTo(selected);
  });

  // Search within the trace: names, ids, inputs, outputs and exceptions (the server's
  // $contains over the trace's calls); matches are opened and highlighted, Enter goes to the next.
  const found = h('span.muted#trace-matches', { 'aria-live': 'polite' });
  let order = [];
  let at = -1;
  const search = h('input#trace-search', { type: 'search', placeholder: 'Search this trace', 'aria-label': 'Search this trace', 'data-filter': true,
    onkeydown: (e) => { if (e.key === 'Enter') { e.preventDefault(); if (search.value.trim() && matches && search.dataset.q === search.value.trim()) next(); else runSearch(); } } });
  async function runSearch() {
    const text = search.value.trim();
    search.dataset.q = text;
    if (!text) { matches = null; clear(found); drawTree(); return; }
    clear(found, 'searching…');
    const c = (p) => ({ $contains: { input: { $getField: p }, substr: { $literal: text }, case_insensitive: true } });
    try {
      const hits = await calls({ project_id: pid, filter: { trace_ids: [call.trace_id] }, columns: ['id'],
        query: { $expr: { $or: [c('op_name'), c('display_name'), c('id'), c('inputs'), c('output'), c('exception')] } } });
      matches = new Set(hits.map((x) => x.id));
      for (const m of matches) openPath(m);
      rows = visible();
      order = rows.filter((n) => matches.has(n.c.id)).map((n) => n.c.id);
      at = -1;
      clear(found, plural(matches.size, 'match', 'matches'));
      drawTree();
      if (order.length) next();
    } catch (e) { clear(found, errorBox(e)); }
  }
  function next() {
    if (!order.length) return;
    at = (at + 1) % order.length;
    select(order[at]);
    scrollTo(order[at]);
    clear(found, `${at + 1} of ${plural(order.length, 'match', 'matches')}`);
  }

  const info = h('span#trace-info');
  const loadMs = h('span.muted', { id: 'trace-load-ms' });
  const crumb = h('span');
  const drawInfo = () => {
    const rootCall = roots[0] ? roots[0].c : call;
    const all = usageTotals(rolled[rootCall.id]);
    clear(crumb, rootCall.display_name || opName(rootCall.op_name));
    clear(info, complete ? plural(trace.length, 'call') : `${fmtNum(trace.length)} calls so far…`, all.tokens ? ` · ${fmtNum(all.tokens)} tokens` : '', all.cost ? ` · ${fmtCost(all.cost)}` : '',
      ` · ${fmtMs(tEnd - tStart)}`);
  };
  root.append(
    h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave` }, 'Traces'), ' / ', crumb),
    h('div.traceinfo', {}, info, loadMs,
      h('span.spacer'),
      h('form.inline.tracesearch', { onsubmit: (e) => { e.preventDefault(); runSearch(); } }, search, h('button', { type: 'submit' }, 'Find'), found),
      h('button#expand-all', { type: 'button', onclick: () => { expandAll = true; closed.clear(); for (const n of byId.values()) if (n.kids.length) open.add(n.c.id); rows = visible(); drawTree(); } }, 'Expand all'),
      h('button', { type: 'button', onclick: () => { expandAll = false; open.clear(); for (const r of roots) closed.add(r.c.id); rows = visible(); drawTree(); } }, 'Collapse all'),
      h('label.toggle', {}, h('input#timeline-toggle', { type: 'checkbox', checked: timeline, onchange: (e) => { timeline = e.target.checked; localStorage.setItem('hone.timeline', timeline ? '1' : '0'); drawTree(); } }), ' timeline')),
    h('div.split', {}, viewport, detail));
  const redraw = () => { build(); rows = visible(); drawTree(); drawInfo(); };
  redraw();
  const details = select(id);
  let last = 0;
  const [all, usage] = await Promise.all([
    calls({ project_id: pid, filter: { trace_ids: [call.trace_id] }, sort_by: [{ field: 'started_at', direction: 'asc' }],
      columns: ['id', 'parent_id', 'op_name', 'display_name', 'started_at', 'ended_at', 'exception', 'summary'] }, (part) => {
      // Drawn as it arrives, at most every 150 ms.
      if (performance.now() - last < 150 || !root.isConnected) return;
      last = performance.now();
      trace = part.some((c) => c.id === call.id) ? part.slice() : [...part, call];
      redraw();
    }),
    tr('/trace/usage', { project_id: pid, filter: { trace_ids: [call.trace_id] }, include_costs: true, limit: 100000 }).then((r) => r.call_usage || {}, () => ({})),
  ]);
  trace = all.some((c) => c.id === call.id) ? all : [...all, call];
  rolled = usage;
  complete = true;
  redraw();
  await details;
  const u = detail.querySelector('#usage');
  const shown = byId.get(selected);
  if (u && shown && rolled[selected]) u.textContent = usageLine(shown.c, rolled[selected]);
  viewport.dataset.complete = String(trace.length);
  loadMs.textContent = ` · loaded in ${Math.round(performance.now() - t0)} ms`;
  if (viewport.scrollTop === 0) scrollTo(id); // unless the user scrolled the tree meanwhile
  drawTree();
}

export function isMessages(v) {
  return Array.isArray(v) && v.length > 0 && v.every((m) => m && typeof m === 'object' && typeof m.role === 'string');
}

// conversation renders chat messages as a conversation (Markdown unless raw). opts.actions(m,
// i) adds buttons to a message (the playground's edit and regenerate).
export function conversation(msgs, opts = {}) {
  const text = (s) => (opts.raw ? h('div.content.raw', {}, s) : h('div.content', {}, markdown(s)));
  return h('div.chat', {}, msgs.map((m, i) => h('div.msg.' + m.role, { 'data-i': i },
    h('div.role', {}, m.role + (m.name ? ` · ${m.name}` : ''), opts.actions ? opts.actions(m, i) : ''),
    m.content !== undefined && m.content !== null && m.content !== '' ? (typeof m.content === 'string' ? text(m.content)
      : Array.isArray(m.content) ? h('div.content', {}, m.content.map((p) => (p.type === 'text' ? (opts.raw ? p.text : markdown(p.text)) : jsonView(p, 1)))) : jsonView(m.content, 1)) : '',
    m.reasoning || m.reasoning_content ? h('details.reasoning', {}, h('summary', {}, 'reasoning'), m.reasoning || m.reasoning_content) : '',
    m.tool_calls ? h('div.toolcalls', {}, m.tool_calls.map((t) => h('div.toolcall', {}, '→ ', h('code', {}, `${t.function && t.function.name}(${t.function && t.function.arguments})`)))) : '',
    m.meta ? h('div.msgmeta.muted', {}, m.meta) : '')));
}

// chatView shows chat messages with a switch between Markdown and the raw text (one switch
// for every conversation on the page, kept in this browser).
function chatView(msgs) {
  const box = h('div.chatbox');
  const draw = () => {
    if (!box.isConnected && box.dataset.drawn) { document.removeEventListener('hone:raw', draw); return; }
    box.dataset.drawn = '1';
    const raw = localStorage.getItem('hone.raw') === '1';
    clear(box, h('div.chattools', {}, h('label.toggle', {}, h('input.rawtoggle', { type: 'checkbox', checked: raw, onchange: (e) => {
      localStorage.setItem('hone.raw', e.target.checked ? '1' : '0');
      document.dispatchEvent(new CustomEvent('hone:raw'));
    } }), ' raw text')), conversation(msgs, { raw }));
  };
  document.addEventListener('hone:raw', draw);
  draw();
  return box;
}

function ioView(v) {
  if (v && typeof v === 'object') {
    if (isMessages(v.messages)) {
      const rest = { ...v }; delete rest.messages;
      return [chatView(v.messages), Object.keys(rest).length ? jsonView(rest, 1) : ''];
    }
    if (Array.isArray(v.choices) && v.choices.length && v.choices[0].message) {
      return [chatView(v.choices.map((c) => c.message)), h('details', {}, h('summary', {}, 'raw'), jsonView(v, 2))];
    }
  }
  if (typeof v === 'string' && v.length > 80) return h('div.json.textval', {}, markdown(v));
  return jsonView(v, 2);
}

// exceptionView: the Python SDK's JSON as "Type: message" and its frames; other text as it is.
export function exceptionView(e) {
  const x = parseException(e);
  if (!x) return h('div.exception', { role: 'alert' }, h('strong', {}, 'Exception'), h('pre', {}, e));
  const frames = Array.isArray(x.traceback) ? x.traceback : [];
  return h('div.exception', { role: 'alert' },
    h('div.exchead', {}, h('strong.extype', {}, x.type), x.message ? [': ', h('span.exmsg', {}, x.message)] : ''),
    frames.length ? h('details.frames', { open: true }, h('summary', {}, `Traceback (${plural(frames.length, 'frame')}, most recent call last)`),
      h('ol.framelist', {}, frames.map((f) => (typeof f === 'string' ? h('li', {}, h('pre', {}, f))
        : h('li', {}, h('div.where', {}, h('code', {}, f.filename || '?'), f.line_number ? `:${f.line_number}` : '', f.function_name ? [' in ', h('code', {}, f.function_name)] : ''),
          f.text ? h('pre.src', {}, f.text) : ''))))) : '',
    h('details', {}, h('summary', {}, 'raw'), h('pre', {}, e)));
}

// usageLine is a call's tokens (with its descendants' once the trace's roll-up is read), cost
// and requests.
function usageLine(c, rolledUsage) {
  const own = usageTotals(c.summary && c.summary.usage);
  const sub = usageTotals(rolledUsage);
  return `${fmtNum(sub.tokens || own.tokens)} with descendants` + (sub.cost ? ` · ${fmtCost(sub.cost)}` : '') + (sub.requests ? ` · ${plural(sub.requests, 'request')}` : '');
}

function callDetail(pid, c, rolledUsage) {
  const ref = `weave:///${pid}/call/${c.id}`;
  const fb = h('div.feedback');
  const chat = c.inputs && isMessages(c.inputs.messages);
  const [e, p] = pid.split('/');
  const box = h('div', {},
    h('h2', {}, h('span.name', {}, c.display_name || opName(c.op_name)), ' ', statusBadge(statusOf(c)), ' ',
      h('button.link#rename', { type: 'button', title: 'Rename this call', onclick: async (ev) => {
        const h2 = ev.target.closest('h2');
        const name = await promptDialog('Name of this call', c.display_name || opName(c.op_name), 'Rename');
        if (name === null || !name.trim()) return;
        try {
          await tr('/call/update', { project_id: pid, call_id: c.id, display_name: name.trim() });
          c.display_name = name.trim();
          h2.querySelector('.name').textContent = c.display_name;
          for (const n of document.querySelectorAll(`.tree .node[data-id="${CSS.escape(c.id)}"] .op`)) n.textContent = c.display_name;
        } catch (err) { toast(err, 'error'); }
      } }, 'rename')),
    h('div.calltools', {},
      copyButton(c.id, 'Copy id'), copyButton(() => location.origin + `/${enc(e)}/${enc(p)}/weave/calls/${enc(c.id)}`, 'Copy link'),
      chat ? h('a.button#open-playground', { href: `/playground?call=${enc(pid + '/' + c.id)}` }, 'Open in playground') : ''),
    h('dl.meta', {},
      h('dt', {}, 'Call'), h('dd', {}, h('code', {}, c.id)),
      h('dt', {}, 'Op'), h('dd', {}, c.op_name.startsWith('weave:///') ? h('a', { href: opHref(c.op_name) }, opName(c.op_name), h('span.muted', {}, ' (op source)')) : c.op_name),
      h('dt', {}, 'Started'), h('dd', {}, fmtTime(c.started_at)),
      h('dt', {}, 'Latency'), h('dd', {}, fmtMs(latencyOf(c))),
      h('dt', {}, 'Tokens'), h('dd', { id: 'usage' }, usageLine(c, rolledUsage))),
    c.exception ? exceptionView(c.exception) : '',
    h('h3', {}, 'Inputs ', copyButton(() => JSON.stringify(c.inputs, null, 2), 'Copy')), ioView(c.inputs),
    h('h3', {}, 'Output ', c.output !== undefined && c.output !== null ? copyButton(() => (typeof c.output === 'string' ? c.output : JSON.stringify(c.output, null, 2)), 'Copy') : ''),
    c.output === undefined || c.output === null ? h('p.muted', {}, c.ended_at ? 'null' : 'running…') : ioView(c.output),
    h('h3', {}, 'Feedback'), fb,
    h('details', {}, h('summary', {}, 'Attributes and summary'), jsonView({ attributes: c.attributes, summary: c.summary }, 1)));
  loadFeedback(pid, ref, fb);
  return box;
}

export function opHref(ref) {
  const m = /^weave:\/\/\/([^/]+)\/([^/]+)\/op\/([^:]+)(?::([^/]+))?/.exec(ref);
  return m ? `/${enc(m[1])}/${enc(m[2])}/weave/objects/${enc(m[3])}` + (m[4] && m[4] !== '*' ? `?v=${enc(m[4])}` : '') : '#';
}

// loadFeedback shows a call's feedback: reactions toggle (a second 👍 takes yours back), notes
// are added, and anything is deleted after a confirmation.
async function loadFeedback(pid, ref, el, quiet = false) {
  const reload = () => loadFeedback(pid, ref, el, true);
  const purge = (id) => tr('/feedback/purge', { project_id: pid, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: id }] } } });
  await loading(el, async () => {
    const { result } = await tr('/feedback/query', { project_id: pid, query: { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: ref }] } }, sort_by: [{ field: 'created_at', direction: 'asc' }], limit: 200 });
    const mine = (emoji) => result.find((f) => f.feedback_type === REACTION && f.payload.emoji === emoji && (!f.wb_user_id || f.wb_user_id === session.entity));
    let busy = false;
    const act = async (fn) => {
      if (busy) return;
      busy = true;
      try { await fn(); reload(); } catch (e) { busy = false; toast(e, 'error'); }
    };
    const react = (emoji) => act(async () => {
      const had = mine(emoji);
      if (had) await purge(had.id);
      else await tr('/feedback/create', { project_id: pid, weave_ref: ref, feedback_type: REACTION, payload: { emoji } });
    });
    const note = h('input', { placeholder: 'Add a note', name: 'note', 'aria-label': 'Note' });
    return [
      h('div.reactions', {}, ['👍', '👎', '🎉', '🤔'].map((e) => {
        const n = result.filter((f) => f.feedback_type === REACTION && f.payload.emoji === e).length;
        return h('button.react', { type: 'button', title: (mine(e) ? 'Take back ' : 'React ') + e, 'aria-pressed': String(!!mine(e)), onclick: () => react(e) }, e, n ? h('span.n', {}, ' ' + n) : '');
      }),
      h('form.inline', { onsubmit: (e) => { e.preventDefault(); const v = note.value.trim(); if (v) act(() => tr('/feedback/create', { project_id: pid, weave_ref: ref, feedback_type: NOTE, payload: { note: v } })); } }, note, h('button', { type: 'submit' }, 'Add note'))),
      result.length ? h('ul.fblist', {}, result.map((f) => h('li', { 'data-type': f.feedback_type, 'data-id': f.id },
        f.feedback_type === REACTION ? h('span.emoji', {}, f.payload.emoji)
          : f.feedback_type === NOTE ? h('span.note', {}, f.payload.note)
            : [h('code', {}, f.feedback_type), ' ', jsonView(f.payload, 0)],
        h('span.muted', {}, ` ${f.wb_user_id || ''} · ${fmtTime(f.created_at)} `),
        h('button.link.fbdel', { type: 'button', title: 'Delete', 'aria-label': 'Delete this feedback', onclick: async () => {
          const what = f.feedback_type === REACTION ? `the reaction ${f.payload.emoji}` : f.feedback_type === NOTE ? `the note "${f.payload.note}"` : `this ${f.feedback_type} feedback`;
          if (!await confirmDialog(`Delete ${what}?`)) return;
          act(() => purge(f.id));
        } }, '✕'))))
        : emptyState(h('p', {}, 'No feedback yet: react or add a note. Feedback filters the calls table and picks training examples (datasets from calls).')),
    ];
  }, 'Loading feedback…', quiet);
}
