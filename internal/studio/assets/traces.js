// Traces: the calls table (filters, query language, sort, server-side paging), the call page
// (virtualised trace tree, inputs/outputs, conversation, exceptions, usage roll-up, feedback)
// and evaluations (scorer summaries, two runs side by side, in total and by example).
import { calls, tr } from './api.js';
import { h, clear, enc, jsonView, fmtTime, fmtMs, fmtNum, fmtCost, usageTotals, errorBox, loading } from './dom.js';
import { navigate, setQuery, projectBase } from './app.js';

const PAGE = 50;

export const opName = (op) => {
  const m = /\/op\/([^:]+)/.exec(op || '');
  return m ? m[1] : op || '';
};
const statusOf = (c) => (c.summary && c.summary.weave && c.summary.weave.status) || (c.exception ? 'error' : c.ended_at ? 'success' : 'running');
const latencyOf = (c) => (c.summary && c.summary.weave && c.summary.weave.latency_ms) ?? (c.ended_at ? new Date(c.ended_at) - new Date(c.started_at) : null);
const statusBadge = (s) => h('span.badge.st-' + s, {}, s);

function costsOf(c) {
  const costs = c.summary && c.summary.weave && c.summary.weave.costs;
  return costs ? usageTotals(costs).cost : 0;
}

function feedbackSummary(c) {
  const fb = (c.summary && c.summary.weave && c.summary.weave.feedback) || [];
  const counts = {};
  let notes = 0;
  for (const f of fb) {
    if (f.feedback_type === 'wandb.reaction.1') counts[f.payload.emoji] = (counts[f.payload.emoji] || 0) + 1;
    else if (f.feedback_type === 'wandb.note.1') notes++;
  }
  const parts = Object.entries(counts).map(([e, n]) => `${e}${n > 1 ? n : ''}`);
  if (notes) parts.push(`✎${notes > 1 ? notes : ''}`);
  return parts.join(' ');
}

// buildQuery turns the table's filters into a calls query {"$expr": ...}, or undefined.
function buildQuery(f) {
  const and = [];
  const field = (n) => ({ $getField: n });
  const lit = (v) => ({ $literal: v });
  if (f.op) and.push({ $contains: { input: field('op_name'), substr: lit(f.op), case_insensitive: true } });
  if (f.status) and.push({ $eq: [field('summary.weave.status'), lit(f.status)] });
  if (f.from) and.push({ $gte: [field('started_at'), lit(new Date(f.from).toISOString())] });
  if (f.to) and.push({ $lte: [field('started_at'), lit(new Date(f.to).toISOString())] });
  if (f.text) {
    const c = (p) => ({ $contains: { input: field(p), substr: lit(f.text), case_insensitive: true } });
    and.push({ $or: [c('op_name'), c('display_name'), c('id'), c('inputs'), c('output'), c('exception')] });
  }
  if (f.q) and.push(JSON.parse(f.q).$expr);
  if (!and.length) return undefined;
  return { $expr: and.length === 1 ? and[0] : { $and: and } };
}

const COLUMNS = [
  ['op', 'Op', 'op_name'], ['status', 'Status', 'summary.weave.status'], ['start', 'Start', 'started_at'],
  ['latency', 'Latency', 'summary.weave.latency_ms'], ['tokens', 'Tokens', null], ['cost', 'Cost', null], ['feedback', 'Feedback', null],
];

export async function callsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  const f = {
    op: q.get('op') || '', status: q.get('status') || '', from: q.get('from') || '', to: q.get('to') || '',
    text: q.get('text') || '', q: q.get('q') || '', all: q.get('all') === '1',
    sort: q.get('sort') || 'started_at', dir: q.get('dir') || 'desc', page: +(q.get('page') || 0),
  };
  const table = h('div.tablewrap');
  const pager = h('div.pager');
  // Calls picked with the table's checkboxes, for deleting them together.
  const picked = new Set();
  const bulk = h('span.bulk');
  const drawBulk = () => clear(bulk, picked.size ? h('button.danger#delete-selected', {
    onclick: async () => {
      if (!confirm(`Delete ${picked.size} call(s) and their descendants?`)) return;
      try {
        await tr('/calls/delete', { project_id: pid, call_ids: [...picked] });
        picked.clear();
        drawBulk();
        load();
      } catch (e) { bulk.append(errorBox(e)); }
    },
  }, `Delete ${picked.size} selected`) : '');
  const input = (name, attrs) => h('input', { name, value: f[name], ...attrs });
  const form = h('form.filters', {
    onsubmit: (e) => {
      e.preventDefault();
      const d = new FormData(form);
      for (const k of ['op', 'status', 'from', 'to', 'text', 'q']) f[k] = (d.get(k) || '').trim();
      f.all = d.get('all') === 'on';
      f.page = 0;
      load();
    },
  },
  input('text', { placeholder: 'Search…', 'data-filter': true, type: 'search', 'aria-label': 'Search' }),
  input('op', { placeholder: 'Op', 'aria-label': 'Op' }),
  h('select', { name: 'status', 'aria-label': 'Status' }, ['', 'success', 'error', 'running'].map((s) => h('option', { value: s, selected: s === f.status }, s || 'any status'))),
  h('label', {}, 'from ', input('from', { type: 'datetime-local' })),
  h('label', {}, 'to ', input('to', { type: 'datetime-local' })),
  h('label', {}, h('input', { type: 'checkbox', name: 'all', checked: f.all }), ' nested calls'),
  h('details.querybox', {}, h('summary', {}, 'Query'),
    h('textarea', { name: 'q', rows: 3, placeholder: '{"$expr": {"$gt": [{"$getField": "summary.weave.latency_ms"}, {"$literal": 1000}]}}', value: f.q })),
  h('button.primary', { type: 'submit' }, 'Apply'));

  root.append(h('h1', {}, 'Traces ', h('span.muted', {}, pid)), form, pager, table);

  async function load() {
    setQuery({ op: f.op, status: f.status, from: f.from, to: f.to, text: f.text, q: f.q, all: f.all ? '1' : '', sort: f.sort === 'started_at' ? '' : f.sort, dir: f.dir === 'desc' ? '' : f.dir, page: f.page || '' });
    let query;
    try { query = buildQuery(f); } catch (e) { clear(table, errorBox('Query is not JSON: ' + e.message)); return; }
    const filter = f.all ? {} : { trace_roots_only: true };
    const t0 = performance.now();
    await loading(table, async () => {
      const [rows, stats] = await Promise.all([
        calls({ project_id: pid, filter, query, sort_by: [{ field: f.sort, direction: f.dir }], limit: PAGE, offset: f.page * PAGE, include_costs: true, include_feedback: true,
          columns: ['id', 'trace_id', 'parent_id', 'op_name', 'display_name', 'started_at', 'ended_at', 'exception', 'summary'] }),
        tr('/calls/query_stats', { project_id: pid, filter, query }),
      ]);
      renderPager(stats.count, performance.now() - t0);
      return renderTable(rows);
    });
  }

  function renderPager(count, ms) {
    const pages = Math.max(1, Math.ceil(count / PAGE));
    const go = (p) => { f.page = p; load(); };
    clear(pager,
      h('span', { id: 'calls-count' }, `${fmtNum(count)} calls`), h('span.muted', {}, ` · ${Math.round(ms)} ms`),
      ' ', bulk,
      h('span.spacer'),
      h('button', { disabled: f.page === 0, onclick: () => go(f.page - 1), title: 'Previous page' }, '‹'),
      h('span', {}, ` page ${f.page + 1} of ${fmtNum(pages)} `),
      h('button', { disabled: f.page + 1 >= pages, onclick: () => go(f.page + 1), title: 'Next page' }, '›'));
  }

  function renderTable(rows) {
    if (!rows.length) return h('p.muted', {}, 'No calls match.');
    const boxes = [];
    const all = h('input', { type: 'checkbox', 'aria-label': 'Select all calls on this page', onchange: (e) => {
      for (const b of boxes) { b.checked = e.target.checked; e.target.checked ? picked.add(b.dataset.id) : picked.delete(b.dataset.id); }
      drawBulk();
    } });
    const head = h('tr', {}, COLUMNS.map(([key, label, field]) => {
      if (!field) return h('th', {}, label);
      const active = f.sort === field;
      return h('th.sortable' + (active ? '.sorted' : ''), {
        onclick: () => { f.dir = active && f.dir === 'desc' ? 'asc' : 'desc'; f.sort = field; f.page = 0; load(); },
        'aria-sort': active ? (f.dir === 'asc' ? 'ascending' : 'descending') : 'none',
      }, label, active ? (f.dir === 'asc' ? ' ▲' : ' ▼') : '');
    }), h('th', {}, all));
    const body = h('tbody');
    for (const c of rows) {
      const u = usageTotals(c.summary && c.summary.usage);
      const href = `${projectBase()}/weave/calls/${enc(c.id)}`;
      body.append(h('tr.row', { 'data-href': href, 'data-id': c.id },
        h('td', {}, h('a', { href }, c.display_name || opName(c.op_name))),
        h('td', {}, statusBadge(statusOf(c))),
        h('td', {}, fmtTime(c.started_at)),
        h('td.num', {}, fmtMs(latencyOf(c))),
        h('td.num', {}, u.tokens ? fmtNum(u.tokens) : ''),
        h('td.num', {}, fmtCost(costsOf(c))),
        h('td', {}, feedbackSummary(c)),
        h('td', {}, (() => {
          const b = h('input.pick', { type: 'checkbox', 'aria-label': 'Select call', 'data-id': c.id, checked: picked.has(c.id),
            onchange: (e) => { e.target.checked ? picked.add(c.id) : picked.delete(c.id); drawBulk(); } });
          boxes.push(b);
          return b;
        })())));
    }
    const t = h('table.grid.calls', {}, h('thead', {}, head), body);
    keyRows(t);
    return t;
  }
  await load();
}

// keyRows lets j/k and ↑/↓ move a selection over a table's rows and Enter open the row.
export function keyRows(table) {
  table.tabIndex = 0;
  let i = -1;
  table.addEventListener('keydown', (e) => {
    const rows = [...table.querySelectorAll('tr.row')];
    if (!rows.length) return;
    if (e.key === 'j' || e.key === 'ArrowDown') i = Math.min(rows.length - 1, i + 1);
    else if (e.key === 'k' || e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'Enter' && rows[i] && rows[i].dataset.href) { navigate(rows[i].dataset.href); return; } else return;
    e.preventDefault();
    rows.forEach((r, j) => r.classList.toggle('sel', j === i));
    rows[i].scrollIntoView({ block: 'nearest' });
  });
}

// ---- The call page -------------------------------------------------------------------

const ROW = 26;

export async function callView(root, [entity, project, id]) {
  const pid = `${entity}/${project}`;
  const t0 = performance.now();
  const { call } = await tr('/call/read', { project_id: pid, id, include_costs: true });
  // The trace's calls (without inputs and outputs) and its usage roll-up, at once. The usage
  // route refuses more than its limit of calls rather than truncate: the tree shows without.
  const [trace, rolled] = await Promise.all([
    calls({ project_id: pid, filter: { trace_ids: [call.trace_id] }, sort_by: [{ field: 'started_at', direction: 'asc' }],
      columns: ['id', 'parent_id', 'op_name', 'display_name', 'started_at', 'ended_at', 'exception', 'summary'] }),
    tr('/trace/usage', { project_id: pid, filter: { trace_ids: [call.trace_id] }, include_costs: true, limit: 100000 }).then((r) => r.call_usage || {}, () => ({})),
  ]);

  // Tree: children in start order; a call whose parent is not in the trace is a root.
  const byId = new Map(trace.map((c) => [c.id, { c, kids: [], depth: 0 }]));
  const roots = [];
  for (const n of byId.values()) {
    const p = n.c.parent_id && byId.get(n.c.parent_id);
    (p ? p.kids : roots).push(n);
  }
  const stack = roots.map((n) => [n, 0]);
  while (stack.length) { const [n, d] = stack.pop(); n.depth = d; for (const k of n.kids) stack.push([k, d + 1]); }
  // Open: the roots, and the path down to the call this page is about.
  const open = new Set(roots.map((n) => n.c.id));
  for (let n = byId.get(id); n && n.c.parent_id; n = byId.get(n.c.parent_id)) open.add(n.c.parent_id);
  let selected = id;

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

  const viewport = h('div.tree', { tabIndex: 0, role: 'tree', 'aria-label': 'Trace tree' });
  const spacer = h('div.spacer-v');
  viewport.append(spacer);
  let rows = visible();
  const detail = h('section.detail');

  function drawTree() {
    spacer.style.height = rows.length * ROW + 'px';
    const first = Math.max(0, Math.floor(viewport.scrollTop / ROW) - 10);
    const last = Math.min(rows.length, first + Math.ceil((viewport.clientHeight || 600) / ROW) + 20);
    const frag = [];
    for (let i = first; i < last; i++) {
      const n = rows[i];
      const c = n.c;
      const u = usageTotals(rolled[c.id] || (c.summary && c.summary.usage));
      const isOpen = open.has(c.id);
      frag.push(h('div.node' + (c.id === selected ? '.sel' : '') + (c.exception ? '.exc' : ''), {
        role: 'treeitem', 'aria-expanded': n.kids.length ? String(isOpen) : undefined, 'data-id': c.id,
        style: { top: i * ROW + 'px', paddingLeft: 8 + n.depth * 16 + 'px' },
        onclick: () => select(c.id),
      },
      n.kids.length ? h('button.tog', { 'aria-label': isOpen ? 'Collapse' : 'Expand', onclick: (e) => { e.stopPropagation(); toggle(c.id); } }, isOpen ? '▾' : '▸') : h('span.tog'),
      h('span.dot.st-' + statusOf(c)),
      h('span.op', {}, c.display_name || opName(c.op_name)),
      n.kids.length ? h('span.muted', {}, ` (${n.kids.length})`) : '',
      h('span.spacer'),
      u.tokens ? h('span.muted', { title: 'tokens, this call and below' }, fmtNum(u.tokens) + ' tok ') : '',
      h('span.muted', {}, fmtMs(latencyOf(c)))));
    }
    viewport.replaceChildren(spacer, ...frag);
  }
  function toggle(cid) {
    open.has(cid) ? open.delete(cid) : open.add(cid);
    rows = visible();
    drawTree();
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
      return callDetail(pid, r.call, rolled[cid]);
    });
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
    const y = rows.findIndex((m) => m.c.id === selected) * ROW;
    if (y < viewport.scrollTop || y > viewport.scrollTop + viewport.clientHeight - ROW) viewport.scrollTop = y - viewport.clientHeight / 2;
  });

  const rootCall = roots[0] ? roots[0].c : call;
  const all = usageTotals(rolled[rootCall.id]);
  root.append(
    h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave` }, 'Traces'), ' / ', opName(rootCall.op_name)),
    h('div.traceinfo', {}, `${fmtNum(trace.length)} calls`, all.tokens ? ` · ${fmtNum(all.tokens)} tokens` : '', all.cost ? ` · ${fmtCost(all.cost)}` : '',
      h('span.muted', { id: 'trace-load-ms' }, ` · loaded in ${Math.round(performance.now() - t0)} ms`),
      h('button', { onclick: () => { for (const n of byId.values()) if (n.kids.length) open.add(n.c.id); rows = visible(); drawTree(); } }, 'Expand all'),
      h('button', { onclick: () => { open.clear(); rows = visible(); drawTree(); } }, 'Collapse all')),
    h('div.split', {}, viewport, detail));
  drawTree();
  await select(id);
  const idx = rows.findIndex((n) => n.c.id === id);
  if (idx * ROW > viewport.clientHeight) { viewport.scrollTop = idx * ROW - viewport.clientHeight / 2; drawTree(); }
}

function isMessages(v) {
  return Array.isArray(v) && v.length > 0 && v.every((m) => m && typeof m === 'object' && typeof m.role === 'string');
}

// conversation renders chat messages as a conversation.
export function conversation(msgs) {
  return h('div.chat', {}, msgs.map((m) => h('div.msg.' + m.role, {},
    h('div.role', {}, m.role + (m.name ? ` · ${m.name}` : '')),
    m.content !== undefined && m.content !== null ? h('div.content', {}, typeof m.content === 'string' ? m.content
      : Array.isArray(m.content) ? m.content.map((p) => (p.type === 'text' ? p.text : jsonView(p, 1))) : jsonView(m.content, 1)) : '',
    m.reasoning || m.reasoning_content ? h('details.reasoning', {}, h('summary', {}, 'reasoning'), m.reasoning || m.reasoning_content) : '',
    m.tool_calls ? h('div.toolcalls', {}, m.tool_calls.map((t) => h('div.toolcall', {}, '→ ', h('code', {}, `${t.function && t.function.name}(${t.function && t.function.arguments})`)))) : '')));
}

function ioView(v) {
  if (v && typeof v === 'object') {
    if (isMessages(v.messages)) {
      const rest = { ...v }; delete rest.messages;
      return [conversation(v.messages), Object.keys(rest).length ? jsonView(rest, 1) : ''];
    }
    if (Array.isArray(v.choices) && v.choices.length && v.choices[0].message) {
      return [conversation(v.choices.map((c) => c.message)), h('details', {}, h('summary', {}, 'raw'), jsonView(v, 2))];
    }
  }
  return jsonView(v, 2);
}

function callDetail(pid, c, rolledUsage) {
  const ref = `weave:///${pid}/call/${c.id}`;
  const own = usageTotals(c.summary && c.summary.usage);
  const sub = usageTotals(rolledUsage);
  const fb = h('div.feedback');
  const box = h('div', {},
    h('h2', {}, h('span.name', {}, c.display_name || opName(c.op_name)), ' ', statusBadge(statusOf(c)), ' ',
      h('button.link#rename', { title: 'Rename this call', onclick: async (e) => {
        const name = prompt('Name of this call', c.display_name || opName(c.op_name));
        if (name === null || !name.trim()) return;
        try {
          await tr('/call/update', { project_id: pid, call_id: c.id, display_name: name.trim() });
          c.display_name = name.trim();
          e.target.closest('h2').querySelector('.name').textContent = c.display_name;
          for (const n of document.querySelectorAll(`.tree .node[data-id="${CSS.escape(c.id)}"] .op`)) n.textContent = c.display_name;
        } catch (err) { e.target.closest('h2').append(errorBox(err)); }
      } }, 'rename')),
    h('dl.meta', {},
      h('dt', {}, 'Call'), h('dd', {}, h('code', {}, c.id)),
      h('dt', {}, 'Op'), h('dd', {}, c.op_name.startsWith('weave:///') ? h('a', { href: opHref(c.op_name) }, c.op_name) : c.op_name),
      h('dt', {}, 'Started'), h('dd', {}, fmtTime(c.started_at)),
      h('dt', {}, 'Latency'), h('dd', {}, fmtMs(latencyOf(c))),
      h('dt', {}, 'Tokens'), h('dd', { id: 'usage' }, `${fmtNum(sub.tokens || own.tokens)} with descendants`, sub.cost ? ` · ${fmtCost(sub.cost)}` : '', sub.requests ? ` · ${sub.requests} requests` : '')),
    c.exception ? h('div.exception', { role: 'alert' }, h('strong', {}, 'Exception'), h('pre', {}, c.exception)) : '',
    h('h3', {}, 'Inputs'), ioView(c.inputs),
    h('h3', {}, 'Output'), c.output === undefined || c.output === null ? h('p.muted', {}, c.ended_at ? 'null' : 'running…') : ioView(c.output),
    h('h3', {}, 'Feedback'), fb,
    h('details', {}, h('summary', {}, 'Attributes and summary'), jsonView({ attributes: c.attributes, summary: c.summary }, 1)));
  loadFeedback(pid, ref, fb);
  return box;
}

function opHref(ref) {
  const m = /^weave:\/\/\/([^/]+)\/([^/]+)\/op\/([^:]+)/.exec(ref);
  return m ? `/${enc(m[1])}/${enc(m[2])}/weave/objects/${enc(m[3])}` : '#';
}

async function loadFeedback(pid, ref, el) {
  const reload = () => loadFeedback(pid, ref, el);
  const add = async (feedback_type, payload) => {
    try { await tr('/feedback/create', { project_id: pid, weave_ref: ref, feedback_type, payload }); reload(); } catch (e) { el.append(errorBox(e)); }
  };
  await loading(el, async () => {
    const { result } = await tr('/feedback/query', { project_id: pid, query: { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: ref }] } }, sort_by: [{ field: 'created_at', direction: 'asc' }], limit: 200 });
    const note = h('input', { placeholder: 'Add a note', name: 'note', 'aria-label': 'Note' });
    return [
      h('div.reactions', {}, ['👍', '👎', '🎉', '🤔'].map((e) => h('button.react', { title: 'React ' + e, onclick: () => add('wandb.reaction.1', { emoji: e }) }, e)),
        h('form.inline', { onsubmit: (e) => { e.preventDefault(); if (note.value.trim()) add('wandb.note.1', { note: note.value.trim() }); } }, note, h('button', { type: 'submit' }, 'Add note'))),
      result.length ? h('ul.fblist', {}, result.map((f) => h('li', { 'data-type': f.feedback_type },
        f.feedback_type === 'wandb.reaction.1' ? h('span.emoji', {}, f.payload.emoji)
          : f.feedback_type === 'wandb.note.1' ? h('span.note', {}, f.payload.note)
            : [h('code', {}, f.feedback_type), ' ', jsonView(f.payload, 0)],
        h('span.muted', {}, ` ${f.wb_user_id || ''} · ${fmtTime(f.created_at)} `),
        h('button.link', { title: 'Delete', onclick: async () => { await tr('/feedback/purge', { project_id: pid, query: { $expr: { $eq: [{ $getField: 'id' }, { $literal: f.id }] } } }); reload(); } }, '✕'))))
        : h('p.muted', {}, 'No feedback yet.'),
    ];
  });
}

// ---- Evaluations ------------------------------------------------------------------------

function flatten(v, prefix = '', out = {}) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else out[prefix] = v;
  return out;
}

export async function evaluationsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  const evals = await calls({ project_id: pid, filter: { trace_roots_only: false },
    query: { $expr: { $contains: { input: { $getField: 'op_name' }, substr: { $literal: 'Evaluation.evaluate' }, case_insensitive: false } } },
    sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 200 });
  root.append(h('h1', {}, 'Evaluations'));
  if (!evals.length) { root.append(h('p.muted', {}, 'No evaluation runs yet (weave.Evaluation(...).evaluate(model)).')); return; }
  const picked = new Set((q.get('compare') || '').split(',').filter(Boolean));
  const compareBtn = h('button.primary', { onclick: () => { setQuery({ compare: [...picked].join(',') }); renderCompare(); } }, 'Compare selected');
  const table = h('table.grid', {}, h('thead', {}, h('tr', {}, h('th', {}, ''), h('th', {}, 'Run'), h('th', {}, 'Model'), h('th', {}, 'Started'), h('th', {}, 'Status'), h('th', {}, 'Scores'))),
    h('tbody', {}, evals.map((c) => {
      const scores = flatten(c.output || {});
      return h('tr.row', { 'data-href': `${projectBase()}/weave/calls/${enc(c.id)}` },
        h('td', {}, h('input', { type: 'checkbox', checked: picked.has(c.id), 'aria-label': 'Select run', onchange: (e) => { e.target.checked ? picked.add(c.id) : picked.delete(c.id); } })),
        h('td', {}, h('a', { href: `${projectBase()}/weave/calls/${enc(c.id)}` }, c.display_name || c.id.slice(0, 8))),
        h('td', {}, typeof c.inputs.model === 'string' ? h('a', { href: opHref(c.inputs.model.replace('/object/', '/op/')) }, opName(c.inputs.model.replace('/object/', '/op/'))) : ''),
        h('td', {}, fmtTime(c.started_at)), h('td', {}, statusBadge(statusOf(c))),
        h('td.scores', {}, Object.entries(scores).filter(([, v]) => typeof v === 'number' || typeof v === 'boolean').slice(0, 6).map(([k, v]) => h('span.score', {}, `${k} ${typeof v === 'number' ? +v.toFixed(4) : v}`))));
    })));
  keyRows(table);
  const cmp = h('div');
  root.append(table, h('p', {}, compareBtn, h('span.muted', {}, ' pick two runs')), cmp);
  function renderCompare() {
    const runs = evals.filter((c) => picked.has(c.id)).slice(0, 2);
    if (runs.length < 2) { clear(cmp); return; }
    const [a, b] = runs.map((c) => flatten(c.output || {}));
    const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
    clear(cmp, h('h2', {}, 'Side by side'), h('table.grid.compare', {},
      h('thead', {}, h('tr', {}, h('th', {}, 'Metric'), runs.map((c) => h('th', {}, c.display_name || c.id.slice(0, 8))), h('th', {}, 'Δ'))),
      h('tbody', {}, keys.map((k) => {
        const d = typeof a[k] === 'number' && typeof b[k] === 'number' ? b[k] - a[k] : null;
        return h('tr', {}, h('td', {}, k), h('td.num', {}, fmtVal(a[k])), h('td.num', {}, fmtVal(b[k])),
          h('td.num' + (d > 0 ? '.up' : d < 0 ? '.down' : ''), {}, d === null ? '' : (d > 0 ? '+' : '') + +d.toFixed(4)));
      }))));
    const ex = h('div.examples-wrap');
    cmp.append(ex);
    loading(ex, async () => { const d = h('div'); await renderExamples(pid, runs, d); return d; });
  }
  renderCompare();
}
const fmtVal = (v) => (typeof v === 'number' ? String(+v.toFixed(6)) : v === undefined ? '—' : JSON.stringify(v));

// ---- Per-example comparison of two evaluation runs ----------------------------------------

// stableJSON is JSON with object keys sorted, so that one example is one key in both runs.
const stableJSON = (v) => JSON.stringify(v, (k, x) => (x && typeof x === 'object' && !Array.isArray(x)
  ? Object.fromEntries(Object.keys(x).sort().map((key) => [key, x[key]])) : x));

// examplesOf reads an evaluation run's predict-and-score calls (Python's
// Evaluation.predict_and_score, TypeScript's Evaluation.predictAndScore), by example: a row
// reference, or the row itself. With several trials of one example, the last one counts.
async function examplesOf(pid, run) {
  const kids = await calls({ project_id: pid, filter: { parent_ids: [run.id] }, sort_by: [{ field: 'started_at', direction: 'asc' }], limit: 100000 });
  const out = new Map();
  for (const c of kids) {
    if (!/predict_?and_?score$/i.test(opName(c.op_name))) continue;
    const ex = c.inputs ? c.inputs.example : undefined;
    const o = c.output && typeof c.output === 'object' ? c.output : {};
    out.set(typeof ex === 'string' ? ex : stableJSON(ex), { call: c, example: ex, output: 'output' in o ? o.output : o.model_output, scores: flatten(o.scores || {}) });
  }
  return out;
}

const preview = (v, n = 160) => {
  const s = typeof v === 'string' ? v : v === undefined ? '—' : JSON.stringify(v);
  return s.length > n ? s.slice(0, n) + '…' : s;
};
const asNum = (v) => (typeof v === 'boolean' ? +v : v);

// renderExamples puts the two runs' results side by side, one row per example (in either
// run): its row (read through its reference), each run's output, and each numeric or boolean
// score as "a → b", green where it went up, red where it went down.
async function renderExamples(pid, runs, into) {
  const [ea, eb] = await Promise.all(runs.map((r) => examplesOf(pid, r)));
  const keys = [...new Set([...ea.keys(), ...eb.keys()])];
  if (!keys.length) { clear(into, h('p.muted', {}, 'Neither run recorded per-example calls.')); return; }
  const rows = {};
  const refs = keys.filter((k) => k.startsWith('weave:///'));
  if (refs.length) {
    try {
      const r = await tr('/refs/read_batch', { refs });
      refs.forEach((k, i) => { rows[k] = r.vals[i]; });
    } catch { /* the references are shown as they are */ }
  }
  const scoreKeys = [...new Set([...ea.values(), ...eb.values()].flatMap((x) => Object.entries(x.scores)
    .filter(([, v]) => typeof v === 'number' || typeof v === 'boolean').map(([k]) => k)))].sort();
  let differ = 0;
  const body = keys.map((key) => {
    const a = ea.get(key), b = eb.get(key);
    const ex = key in rows ? rows[key] : (a || b).example;
    let changed = !a || !b || stableJSON(a.output) !== stableJSON(b.output);
    const cells = scoreKeys.map((k) => {
      const x = a ? asNum(a.scores[k]) : undefined, y = b ? asNum(b.scores[k]) : undefined;
      const d = typeof x === 'number' && typeof y === 'number' ? y - x : null;
      if (d) changed = true;
      return h('td.num' + (d > 0 ? '.up' : d < 0 ? '.down' : ''), { 'data-score': k }, `${fmtVal(a && a.scores[k])} → ${fmtVal(b && b.scores[k])}`);
    });
    if (changed) differ++;
    return h('tr' + (changed ? '.differs' : '.same'), {},
      h('td.example', { title: typeof ex === 'string' ? ex : JSON.stringify(ex) }, preview(ex, 120)),
      h('td.out', {}, a ? h('a', { href: `${projectBase()}/weave/calls/${enc(a.call.id)}` }, preview(a.output)) : '—'),
      h('td.out', {}, b ? h('a', { href: `${projectBase()}/weave/calls/${enc(b.call.id)}` }, preview(b.output)) : '—'),
      cells);
  });
  const table = h('table.grid.examples', {},
    h('thead', {}, h('tr', {}, h('th', {}, 'Example'), runs.map((c) => h('th', {}, 'Output: ' + (c.display_name || c.id.slice(0, 8)))), scoreKeys.map((k) => h('th', {}, k)))),
    h('tbody', {}, body));
  const only = h('input', { type: 'checkbox', name: 'only-differing', onchange: (e) => table.classList.toggle('only-differing', e.target.checked) });
  clear(into, h('h2', {}, 'By example'),
    h('p', {}, h('span#examples-count', {}, `${keys.length} examples, ${differ} differ`), ' · ', h('label', {}, only, ' only those that differ')),
    table);
}
