// Traces: the calls table (filters, feedback and model filters, the query language, previews of
// inputs and outputs, a column picker, sort and paging by the server, saved views (views.js), the server's
// export as JSON lines, JSON, CSV or TSV, picked calls deleted or added to a Dataset for
// training), and the helpers the call page and the evaluations share.
import { calls, callsExport, tr, v1 } from './api.js';
import { h, clear, enc, fmtTime, fmtMs, fmtNum, fmtCost, usageTotals, errorBox, loading, emptyState, plural, download, confirmDialog, promptDialog, toast, spinner, STALE } from './dom.js';
import { navigate, setQuery, projectBase } from './app.js';
import { listViews, readView, saveView, deleteView, newViewID, viewTarget } from './views.js';

const PAGE = 50;

// The server's exports (POST /calls/stream_query by Accept): kind → [Accept, label]. CSV and
// TSV hold EXPORT_COLUMNS, flattened; JSON and JSON lines whole calls.
const EXPORTS = {
  jsonl: ['application/jsonl', 'JSON lines (.jsonl)'],
  json: ['application/json', 'JSON (.json)'],
  csv: ['text/csv', 'CSV (.csv)'],
  tsv: ['text/tab-separated-values', 'TSV (.tsv)'],
};
const EXPORT_COLUMNS = ['id', 'trace_id', 'parent_id', 'op_name', 'display_name', 'started_at', 'ended_at', 'summary.weave.status', 'summary.weave.latency_ms',
  'inputs', 'output', 'exception', 'summary.usage', 'summary.weave.costs', 'summary.weave.feedback'];
const MAX_EXPORT = 100000;

export const opName = (op) => {
  const m = /\/op\/([^:]+)/.exec(op || '');
  return m ? m[1] : op || '';
};
export const statusOf = (c) => (c.summary && c.summary.weave && c.summary.weave.status) || (c.exception ? 'error' : c.ended_at ? 'success' : 'running');
export const latencyOf = (c) => (c.summary && c.summary.weave && c.summary.weave.latency_ms) ?? (c.ended_at ? new Date(c.ended_at) - new Date(c.started_at) : null);
export const statusBadge = (s) => h('span.badge.st-' + s, {}, s.replace('_', ' '));

function costsOf(c) {
  const costs = c.summary && c.summary.weave && c.summary.weave.costs;
  return costs ? usageTotals(costs).cost : 0;
}

export const REACTION = 'wandb.reaction.1';
export const NOTE = 'wandb.note.1';

function feedbackSummary(c) {
  const fb = (c.summary && c.summary.weave && c.summary.weave.feedback) || [];
  const counts = {};
  let notes = 0;
  for (const f of fb) {
    if (f.feedback_type === REACTION) counts[f.payload.emoji] = (counts[f.payload.emoji] || 0) + 1;
    else if (f.feedback_type === NOTE) notes++;
  }
  const parts = Object.entries(counts).map(([e, n]) => `${e}${n > 1 ? n : ''}`);
  if (notes) parts.push(`✎${notes > 1 ? notes : ''}`);
  return parts.join(' ');
}

// modelOf is the model a call asked for (a chat completion's inputs.model), or the model its
// usage names.
export function modelOf(c) {
  if (c.inputs && typeof c.inputs.model === 'string') return c.inputs.model.startsWith('weave:///') ? opName(c.inputs.model.replace('/object/', '/op/')) : c.inputs.model;
  const u = c.summary && c.summary.usage;
  return u ? Object.keys(u).join(', ') : '';
}

const textOf = (content) => (typeof content === 'string' ? content
  : Array.isArray(content) ? content.map((p) => (p && p.type === 'text' ? p.text : '')).join(' ') : '');

// previewIn and previewOut are one line of a call's inputs and output: a chat's last user
// message and its reply, or the JSON.
export function previewIn(v) {
  if (v && typeof v === 'object' && Array.isArray(v.messages)) {
    const u = [...v.messages].reverse().find((m) => m && m.role === 'user');
    if (u) return textOf(u.content);
  }
  if (v && typeof v === 'object') {
    const rest = Object.fromEntries(Object.entries(v).filter(([k]) => k !== 'self'));
    const keys = Object.keys(rest);
    if (keys.length === 1 && typeof rest[keys[0]] === 'string') return rest[keys[0]];
    return keys.length ? JSON.stringify(rest) : '';
  }
  return v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
}
export function previewOut(v) {
  if (v && typeof v === 'object' && Array.isArray(v.choices) && v.choices[0] && v.choices[0].message) {
    const m = v.choices[0].message;
    return textOf(m.content) || (m.tool_calls ? m.tool_calls.map((t) => `${t.function && t.function.name}(…)`).join(' ') : '');
  }
  return v === undefined || v === null ? '' : typeof v === 'string' ? v : JSON.stringify(v);
}
const clip = (s, n = 120) => (s.length > n ? s.slice(0, n) + '…' : s);
// fmtShort is a start time in a table: the time alone today, the day and time otherwise.
function fmtShort(s) {
  const d = new Date(s);
  if (isNaN(d)) return s || '';
  const today = new Date().toDateString() === d.toDateString();
  return d.toLocaleString(undefined, today ? { hour: '2-digit', minute: '2-digit', second: '2-digit' } : { month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit' });
}

// The feedback filter: its values and the query each one adds.
const FEEDBACK = [
  ['', 'any feedback'], ['👍', '👍'], ['👎', '👎'], ['reaction', 'any reaction'], ['note', 'with a note'], ['some', 'with feedback'], ['none', 'without feedback'],
];
function feedbackCond(v) {
  const field = (n) => ({ $getField: n });
  const lit = (x) => ({ $literal: x });
  const has = (type) => ({ $not: [{ $eq: [field(`feedback.[${type}].id`), lit('')] }] });
  switch (v) {
    case '': return null;
    case 'reaction': return has(REACTION);
    case 'note': return has(NOTE);
    case 'some': return has('*');
    case 'none': return { $eq: [field('feedback.[*].id'), lit('')] };
    default: return { $eq: [field(`feedback.[${REACTION}].payload.emoji`), lit(v)] };
  }
}

// buildQuery turns the table's filters into a calls query {"$expr": ...}, or undefined.
// withQ false leaves out the query-language text (when it is not valid).
function buildQuery(f, withQ = true) {
  const and = [];
  const field = (n) => ({ $getField: n });
  const lit = (v) => ({ $literal: v });
  if (f.op) and.push({ $contains: { input: field('op_name'), substr: lit(f.op), case_insensitive: true } });
  if (f.status) and.push({ $eq: [field('summary.weave.status'), lit(f.status)] });
  if (f.model) and.push({ $contains: { input: field('inputs.model'), substr: lit(f.model), case_insensitive: true } });
  if (f.feedback) and.push(feedbackCond(f.feedback));
  if (f.from) and.push({ $gte: [field('started_at'), lit(new Date(f.from).toISOString())] });
  if (f.to) and.push({ $lte: [field('started_at'), lit(new Date(f.to).toISOString())] });
  if (f.text) {
    const c = (p) => ({ $contains: { input: field(p), substr: lit(f.text), case_insensitive: true } });
    and.push({ $or: [c('op_name'), c('display_name'), c('id'), c('inputs'), c('output'), c('exception')] });
  }
  if (f.q && withQ) {
    const q = JSON.parse(f.q);
    if (!q || typeof q !== 'object' || !q.$expr) throw new SyntaxError('a query is {"$expr": ...}');
    and.push(q.$expr);
  }
  if (!and.length) return undefined;
  return { $expr: and.length === 1 ? and[0] : { $and: and } };
}

// COLUMNS: key, label, sort field (null: not sortable), shown by default, cell.
const COLUMNS = [
  ['name', 'Name', 'summary.weave.trace_name', true, (c, href) => h('a', { href }, c.display_name || opName(c.op_name))],
  ['status', 'Status', 'summary.weave.status', true, (c) => statusBadge(statusOf(c))],
  ['input', 'Input', null, true, (c) => { const s = previewIn(c.inputs); return h('span.preview', { title: clip(s, 2000) }, clip(s)); }],
  ['output', 'Output', null, true, (c) => { const s = c.exception ? '⚠ ' + exceptionLine(c.exception) : previewOut(c.output); return h('span.preview', { title: clip(s, 2000) }, clip(s)); }],
  ['model', 'Model', 'inputs.model', true, (c) => modelOf(c)],
  ['start', 'Start', 'started_at', true, (c) => h('time', { datetime: c.started_at, title: fmtTime(c.started_at) }, fmtShort(c.started_at))],
  ['latency', 'Latency', 'summary.weave.latency_ms', true, (c) => fmtMs(latencyOf(c)), 'num'],
  ['tokens', 'Tokens', 'summary.weave.total_tokens', true, (c) => { const u = usageTotals(c.summary && c.summary.usage); return u.tokens ? fmtNum(u.tokens) : ''; }, 'num'],
  ['cost', 'Cost', 'summary.weave.total_cost', true, (c) => fmtCost(costsOf(c)), 'num'],
  ['feedback', 'Feedback', `feedback.[${REACTION}].payload.emoji`, true, (c) => feedbackSummary(c)],
  ['id', 'Id', 'id', false, (c) => h('code', {}, c.id.slice(-12))],
];

// exceptionLine is the first line of an exception: "KeyError: 'x'" for the Python SDK's JSON.
export function exceptionLine(e) {
  const x = parseException(e);
  return x ? `${x.type}${x.message ? ': ' + x.message : ''}` : String(e).split('\n')[0];
}
// parseException reads the Python SDK's exception JSON {type, message, traceback: [{filename,
// line_number, function_name, text}]}; null for plain text.
export function parseException(e) {
  if (typeof e !== 'string' || !e.startsWith('{')) return null;
  try {
    const x = JSON.parse(e);
    return x && typeof x === 'object' && typeof x.type === 'string' ? x : null;
  } catch { return null; }
}

const colsKey = 'hone.calls.columns';
function shownColumns() {
  try {
    const v = JSON.parse(localStorage.getItem(colsKey) || 'null');
    if (Array.isArray(v)) return new Set(v);
  } catch { /* the defaults */ }
  return new Set(COLUMNS.filter((c) => c[3]).map((c) => c[0]));
}

// opened is the saved view last opened and the query string it opened at: the list shows it
// as the current view while the table is at that query string.
let opened = { id: '', search: '' };

// openView shows a saved view: its columns, then its filters, sort and page.
function openView(v) {
  const t = viewTarget(v.val);
  opened = { id: v.id, search: t.search };
  if (t.columns) localStorage.setItem(colsKey, JSON.stringify(t.columns));
  else if (t.cols) {
    const shown = shownColumns();
    for (const [k, on] of Object.entries(t.cols)) on ? shown.add(k) : shown.delete(k);
    localStorage.setItem(colsKey, JSON.stringify([...shown]));
  }
  if (t.left.length) toast(`The view "${v.label}" also sets ${t.left.join(', ')}, which this table does not apply.`);
  navigate(location.pathname + t.search, !!v.replace);
}

export async function callsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  if (q.get('view')) {
    // A view's link: open it in place of the link.
    let v = null;
    try { v = await readView(pid, q.get('view')); } catch (e) { toast(e, 'error'); }
    if (v) { openView({ ...v, replace: true }); return; }
    toast(`There is no saved view "${q.get('view')}" in ${pid}.`, 'error');
    q.delete('view');
    history.replaceState(null, '', location.pathname + (q.toString() ? '?' + q : ''));
  }
  const f = {
    op: q.get('op') || '', status: q.get('status') || '', from: q.get('from') || '', to: q.get('to') || '', model: q.get('model') || '',
    feedback: q.get('feedback') || '', text: q.get('text') || '', q: q.get('q') || '', all: q.get('all') === '1',
    sort: q.get('sort') || 'started_at', dir: q.get('dir') || 'desc', page: +(q.get('page') || 0),
  };
  const shown = shownColumns();
  const table = h('div.tablewrap.callswrap');
  const pager = h('div.pager');
  const queryMsg = h('div.querymsg');
  // Calls picked with the table's checkboxes: deleted together, exported, added to a Dataset.
  const picked = new Set();
  const bulk = h('span.bulk');
  const drawBulk = () => clear(bulk, picked.size ? [
    h('span#picked-count', {}, plural(picked.size, 'call') + ' picked'),
    h('button#add-to-dataset', { type: 'button', onclick: () => addToDataset(pid, [...picked]) }, 'Add to dataset…'),
    h('button.danger#delete-selected', { type: 'button', onclick: async () => {
      if (!await confirmDialog(`Delete ${plural(picked.size, 'call')} and their descendants? This cannot be undone.`)) return;
      try {
        await tr('/calls/delete', { project_id: pid, call_ids: [...picked] });
        toast(`Deleted ${plural(picked.size, 'call')}.`);
        picked.clear();
        drawBulk();
        load();
      } catch (e) { toast(e, 'error'); }
    } }, `Delete ${picked.size} selected`),
    h('button.link', { type: 'button', onclick: () => { picked.clear(); for (const b of table.querySelectorAll('input.pick')) b.checked = false; drawBulk(); } }, 'clear'),
  ] : '');
  const input = (name, attrs) => h('input', { name, value: f[name], ...attrs });
  const qbox = h('textarea', { name: 'q', rows: 3, placeholder: '{"$expr": {"$gt": [{"$getField": "summary.weave.latency_ms"}, {"$literal": 1000}]}}', value: f.q, 'aria-label': 'Calls query' });
  const form = h('form.filters', {
    onsubmit: (e) => {
      e.preventDefault();
      const d = new FormData(form);
      for (const k of ['op', 'status', 'from', 'to', 'text', 'q', 'model', 'feedback']) f[k] = (d.get(k) || '').trim();
      f.all = d.get('all') === 'on';
      f.page = 0;
      load(true);
    },
  },
  input('text', { placeholder: 'Search…', 'data-filter': true, type: 'search', 'aria-label': 'Search' }),
  input('op', { placeholder: 'Op', 'aria-label': 'Op' }),
  input('model', { placeholder: 'Model', 'aria-label': 'Model' }),
  h('select', { name: 'status', 'aria-label': 'Status' }, ['', 'success', 'error', 'running', 'descendant_error'].map((s) => h('option', { value: s, selected: s === f.status }, s ? s.replace('_', ' ') : 'any status'))),
  h('select', { name: 'feedback', 'aria-label': 'Feedback' }, FEEDBACK.map(([v, label]) => h('option', { value: v, selected: v === f.feedback }, label))),
  h('label', {}, 'from ', input('from', { type: 'datetime-local' })),
  h('label', {}, 'to ', input('to', { type: 'datetime-local' })),
  h('label', {}, h('input', { type: 'checkbox', name: 'all', checked: f.all }), ' nested calls'),
  h('button.primary', { type: 'submit' }, 'Apply'),
  h('details.querybox', { open: !!f.q }, h('summary', {}, 'Query ', h('span.muted', {}, '(the calls query language, docs/trace.md)')), qbox, queryMsg));

  // Saved views: on the server, as Weave keeps them (views.js), shared by everyone who sees
  // the project; ?view=<id> opens one by its link.
  let views = [];
  const viewsSel = h('select#views', { 'aria-label': 'Saved views', onchange: () => {
    const v = views.find((x) => x.id === viewsSel.value);
    if (v) openView(v);
  } });
  const drawViews = () => {
    const here = location.search;
    clear(viewsSel, h('option', { value: '' }, views.length ? 'Saved views…' : 'No saved views'),
      views.map((v) => h('option', { value: v.id, selected: (opened.id === v.id && opened.search === here) ||
        (!!v.val.definition && !!v.val.definition.hone_studio && v.val.definition.hone_studio.search === here) }, v.label)));
    for (const b of viewTools.querySelectorAll('#view-link, #delete-view')) b.disabled = !viewsSel.value;
  };
  const loadViews = async () => {
    try { views = await listViews(pid); } catch (e) { views = []; toast(e, 'error'); }
    drawViews();
  };
  const picked1 = () => views.find((x) => x.id === viewsSel.value);
  const viewTools = h('span.views', {}, viewsSel,
    h('button#save-view', { type: 'button', title: 'Save these filters, sort and columns as a view of this project', onclick: async () => {
      const name = await promptDialog('Name of this view', '', 'Save');
      if (!name || !name.trim()) return;
      const label = name.trim();
      const same = views.find((v) => v.label === label);
      try {
        await saveView(pid, same ? same.id : newViewID(), { label, search: location.search, columns: [...shown], query: current.query, all: f.all,
          sort: f.sort, dir: f.dir, page: f.page, pageSize: PAGE });
        await loadViews();
        toast(`Saved the view "${label}" in ${pid}.`);
      } catch (e) { toast(e, 'error'); }
    } }, 'Save view'),
    h('button.link#view-link', { type: 'button', title: 'Copy a link to the selected view', onclick: async () => {
      const v = picked1();
      if (!v) return;
      const url = `${location.origin}${location.pathname}?view=${enc(v.id)}`;
      try { await navigator.clipboard.writeText(url); toast(`Copied the link to "${v.label}".`); } catch { toast(url); }
    } }, 'link'),
    h('button.link#delete-view', { type: 'button', title: 'Delete the selected view (for everyone in this project)', onclick: async () => {
      const v = picked1();
      if (!v || !await confirmDialog(`Delete the view "${v.label}"? It is deleted for everyone in ${pid}.`)) return;
      try {
        await deleteView(pid, v.id);
        await loadViews();
        toast(`Deleted the view "${v.label}".`);
      } catch (e) { toast(e, 'error'); }
    } }, 'delete'));

  // The column picker.
  const picker = h('details.colpicker', {}, h('summary', {}, 'Columns'),
    h('div.menu', {}, COLUMNS.map(([key, label]) => h('label', {}, h('input', { type: 'checkbox', name: 'col-' + key, checked: shown.has(key), onchange: (e) => {
      e.target.checked ? shown.add(key) : shown.delete(key);
      localStorage.setItem(colsKey, JSON.stringify([...shown]));
      load();
    } }), ' ', label))));

  // Export: the filtered calls (or the picked ones), written by the server in the format the
  // request's Accept header asks (as Weave's frontend downloads them).
  const exporter = h('details.colpicker#export', {}, h('summary', {}, 'Export'),
    h('div.menu', {}, Object.entries(EXPORTS).map(([kind, [, label]]) => h('button#export-' + kind, { type: 'button', onclick: () => exportCalls(kind) }, label)),
      h('p.muted', {}, 'The calls that match the filters (the picked ones, when some are picked), in the table\'s order, up to 100,000.')));

  root.append(h('h1', {}, 'Traces ', h('span.muted', {}, pid)), form, h('div.toolbar', {}, viewTools, h('span.spacer'), picker, exporter), pager, table);

  let current = { query: undefined, filter: {} };
  let count = 0; // the calls the filters match (the pager's count)
  let seq = 0; // loads overlap (a sort clicked while a filter loads): only the newest draws
  async function load(push = false) {
    const mine = ++seq;
    setQuery({ op: f.op, status: f.status, from: f.from, to: f.to, text: f.text, q: f.q, model: f.model, feedback: f.feedback, all: f.all ? '1' : '', sort: f.sort === 'started_at' ? '' : f.sort, dir: f.dir === 'desc' ? '' : f.dir, page: f.page || '' }, push);
    drawViews();
    clear(queryMsg);
    qbox.removeAttribute('aria-invalid');
    let query;
    try { query = buildQuery(f); } catch (e) {
      // The table shows the calls without the query, and says so beside it.
      query = buildQuery(f, false);
      form.querySelector('.querybox').open = true;
      qbox.setAttribute('aria-invalid', 'true');
      clear(queryMsg, errorBox(`The query is not valid JSON (${e.message}), so it is not applied: fix it and press Apply.`));
    }
    const filter = f.all ? {} : { trace_roots_only: true };
    current = { query, filter };
    const t0 = performance.now();
    await loading(table, async () => {
      const cols = ['id', 'trace_id', 'parent_id', 'op_name', 'display_name', 'started_at', 'ended_at', 'exception', 'summary'];
      if (shown.has('input') || shown.has('model')) cols.push('inputs');
      if (shown.has('output')) cols.push('output');
      const ask = (qq) => Promise.all([
        calls({ project_id: pid, filter, query: qq, sort_by: [{ field: f.sort, direction: f.dir }], limit: PAGE, offset: f.page * PAGE, include_costs: shown.has('cost'), include_feedback: shown.has('feedback'), columns: cols }),
        tr('/calls/query_stats', { project_id: pid, filter, query: qq }),
      ]);
      let rows, stats;
      try { [rows, stats] = await ask(query); } catch (e) {
        if (mine !== seq) throw STALE;
        if (!(e.status === 400 && f.q && query)) throw e;
        // The server refused the query language: the calls without it, and why.
        form.querySelector('.querybox').open = true;
        qbox.setAttribute('aria-invalid', 'true');
        clear(queryMsg, errorBox(`The query was refused (${e.message}), so it is not applied: fix it and press Apply.`));
        current.query = buildQuery(f, false);
        [rows, stats] = await ask(current.query);
      }
      if (mine !== seq) return STALE;
      renderPager(stats.count, performance.now() - t0);
      return renderTable(rows);
    }, 'Loading calls…');
  }

  async function exportCalls(kind) {
    exporter.open = false;
    const n = picked.size || count;
    if (n > MAX_EXPORT) { toast(`${plural(n, 'call')} match: an export holds at most ${fmtNum(MAX_EXPORT)}. Narrow the filters.`, 'error'); return; }
    const body = picked.size ? { project_id: pid, filter: { call_ids: [...picked] } }
      : { project_id: pid, filter: current.filter, query: current.query };
    body.sort_by = [{ field: f.sort, direction: f.dir }];
    body.include_costs = true;
    body.include_feedback = true;
    // JSON lines are the SDKs' format, which the server does not bound: the table's bound.
    if (kind === 'jsonl') body.limit = MAX_EXPORT;
    // CSV and TSV: these columns, flattened by the server (inputs.messages, summary.weave.status, …).
    if (kind === 'csv' || kind === 'tsv') body.columns = EXPORT_COLUMNS;
    const note = toast('Exporting…');
    try {
      const [accept] = EXPORTS[kind];
      const blob = await callsExport(body, accept);
      const name = `${project}-calls-${new Date().toISOString().slice(0, 19).replace(/[:T]/g, '-')}.${kind}`;
      download(name, blob);
      note.remove();
      toast(`Exported ${plural(n, 'call')} as ${kind.toUpperCase()}.`);
    } catch (e) { note.remove(); toast(e, 'error'); }
  }

  function renderPager(n, ms) {
    count = n;
    const pages = Math.max(1, Math.ceil(count / PAGE));
    const go = (p) => { f.page = p; load(true); };
    clear(pager,
      h('span', { id: 'calls-count' }, plural(n, 'call')), h('span.muted', {}, ` · ${Math.round(ms)} ms`),
      ' ', bulk,
      h('span.spacer'),
      h('button', { type: 'button', disabled: f.page === 0, onclick: () => go(f.page - 1), title: 'Previous page', 'aria-label': 'Previous page' }, '‹'),
      h('span', {}, ` page ${f.page + 1} of ${fmtNum(pages)} `),
      h('button', { type: 'button', disabled: f.page + 1 >= pages, onclick: () => go(f.page + 1), title: 'Next page', 'aria-label': 'Next page' }, '›'));
  }

  function renderTable(rows) {
    if (!rows.length) {
      const filtered = f.op || f.status || f.text || f.q || f.from || f.to || f.model || f.feedback;
      return emptyState(filtered ? h('p', {}, 'No calls match these filters. ', h('a', { href: location.pathname }, 'Clear the filters')) :
        [h('p', {}, 'No calls in this project yet.'), h('p', {}, 'Trace with the Weave SDK (', h('code', {}, `weave.init("${pid}")`), ') or send chat completions with ',
          h('code', {}, `X-Hone-Trace-Project: ${pid}`), '; they appear here.')]);
    }
    const boxes = [];
    const all = h('input', { type: 'checkbox', 'aria-label': 'Pick all calls on this page', onchange: (e) => {
      for (const b of boxes) { b.checked = e.target.checked; e.target.checked ? picked.add(b.dataset.id) : picked.delete(b.dataset.id); }
      drawBulk();
    } });
    const cols = COLUMNS.filter((c) => shown.has(c[0]));
    const head = h('tr', {}, h('th.pickcol', {}, all), cols.map(([key, label, field]) => {
      if (!field) return h('th', { 'data-col': key }, label);
      const active = f.sort === field;
      return h('th.sortable' + (active ? '.sorted' : ''), { 'data-col': key, 'aria-sort': active ? (f.dir === 'asc' ? 'ascending' : 'descending') : 'none' },
        h('button.sortbtn', { type: 'button', onclick: () => { f.dir = active && f.dir === 'desc' ? 'asc' : 'desc'; f.sort = field; f.page = 0; load(true); } },
          label, active ? (f.dir === 'asc' ? ' ▲' : ' ▼') : ''));
    }));
    const body = h('tbody');
    for (const c of rows) {
      const href = `${projectBase()}/weave/calls/${enc(c.id)}`;
      const b = h('input.pick', { type: 'checkbox', 'aria-label': 'Pick call', 'data-id': c.id, checked: picked.has(c.id),
        onchange: (e) => { e.target.checked ? picked.add(c.id) : picked.delete(c.id); drawBulk(); } });
      boxes.push(b);
      body.append(h('tr.row', { 'data-href': href, 'data-id': c.id }, h('td.pickcol', {}, b),
        cols.map(([key, , , , cell, cls]) => h('td' + (cls ? '.' + cls : ''), { 'data-col': key }, cell(c, href)))));
    }
    const t = h('table.grid.calls', {}, h('thead', {}, head), body);
    keyRows(t, { pick: (row) => { const b = row.querySelector('input.pick'); if (b) { b.click(); } } });
    return t;
  }
  drawBulk();
  loadViews();
  await load();
}

// addToDataset asks for a Dataset's name and adds the picked chat completions to it as SFT
// examples (POST /v1/preview/datasets/from-calls with append): the traces → training loop.
async function addToDataset(pid, ids) {
  let names = [];
  try {
    const { objs } = await tr('/objs/query', { project_id: pid, filter: { base_object_classes: ['Dataset'], latest_only: true }, metadata_only: true, limit: 200 });
    names = objs.map((o) => o.object_id);
  } catch { /* a new name only */ }
  const input = h('input#dataset-name', { name: 'dataset', required: true, list: 'dataset-names', value: localStorage.getItem('hone.dataset.' + pid) || `${pid.split('/')[1]}-sft`, pattern: '[A-Za-z0-9._\\-]+', 'aria-label': 'Dataset name' });
  const kind = h('select', { name: 'kind', 'aria-label': 'Kind' }, h('option', { value: 'sft' }, 'SFT examples (messages and the reply)'), h('option', { value: 'rl' }, 'RL trajectory groups (rewards from feedback)'));
  const msg = h('div');
  const d = h('dialog.confirm#dataset-dialog', { 'aria-label': 'Add to dataset' },
    h('form', { method: 'dialog', onsubmit: async (e) => {
      if (e.submitter && e.submitter.value === 'cancel') return;
      e.preventDefault();
      clear(msg, spinner('Adding…'));
      try {
        localStorage.setItem('hone.dataset.' + pid, input.value.trim()); // the next time's default
        const r = await v1('POST', '/v1/preview/datasets/from-calls', { project: pid, name: input.value.trim(), kind: kind.value, append: true,
          query: { $expr: { $in: [{ $getField: 'id' }, ids.map((x) => ({ $literal: x }))] } } });
        const [e2, p2] = pid.split('/');
        clear(msg, h('div.ok#dataset-result', { role: 'status' }, `Added ${plural(r.rows - (r.previous_rows || 0), 'example')} (${plural(r.rows, 'row')} in all) to `,
          h('a', { href: `/${enc(e2)}/${enc(p2)}/weave/objects/${enc(input.value.trim())}` }, input.value.trim()),
          r.skipped ? ` · ${plural(r.skipped, 'call')} skipped (${Object.entries(r.skipped_reasons || {}).map(([k, n]) => `${k}: ${n}`).join(', ')})` : '',
          h('div.muted', {}, 'Train on it: ', h('code', {}, `hone train ${kind.value} --data-url ${r.dataset_ref}`))));
      } catch (err) { clear(msg, errorBox(err)); }
    } },
    h('h2', {}, `Add ${plural(ids.length, 'call')} to a dataset`),
    h('p.muted', {}, 'Chat completions become training examples; the dataset gets a new version with them added (it is created if it does not exist).'),
    h('label', {}, 'Dataset ', input), h('datalist#dataset-names', {}, names.map((n) => h('option', { value: n }))),
    h('label', {}, 'As ', kind), msg,
    h('div.row', {}, h('button', { value: 'cancel', type: 'submit', formnovalidate: true }, 'Close'), h('button.primary#dataset-add', { value: 'ok', type: 'submit' }, 'Add'))));
  d.addEventListener('close', () => d.remove());
  document.body.append(d);
  d.showModal();
}

// keyRows lets j/k and ↑/↓ move a selection over a table's rows, Enter open the row, and x
// pick it (opts.pick).
export function keyRows(table, opts = {}) {
  table.tabIndex = 0;
  table.setAttribute('aria-label', table.getAttribute('aria-label') || 'Table: j and k move, Enter opens');
  let i = -1;
  table.addEventListener('keydown', (e) => {
    if (e.target.closest('input, button, a') && e.target !== table) return;
    const rows = [...table.querySelectorAll('tr.row')];
    if (!rows.length) return;
    if (e.key === 'j' || e.key === 'ArrowDown') i = Math.min(rows.length - 1, i + 1);
    else if (e.key === 'k' || e.key === 'ArrowUp') i = Math.max(0, i - 1);
    else if (e.key === 'Enter' && rows[i] && rows[i].dataset.href) { navigate(rows[i].dataset.href); return; }
    else if (e.key === 'x' && rows[i] && opts.pick) { opts.pick(rows[i]); return; }
    else return;
    e.preventDefault();
    rows.forEach((r, j) => r.classList.toggle('sel', j === i));
    rows[i].scrollIntoView({ block: 'nearest' });
  });
}
