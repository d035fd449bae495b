// Saved views of the calls table, kept on the server as Weave keeps them: objects of base class
// SavedView (`{view_type: "traces", label, definition: {filter, query, cols, sort_by, page,
// page_size}}`, written with /obj/create, listed with /objs/query by base_object_classes,
// deleted with /obj/delete), so that a project's views are shared by everyone who sees the
// project, and the Weave SDKs' views (weave.SavedView(...).save()) open here too.
//
// A view made here maps the table's URL parameters onto the definition where Weave has a field:
// all → filter.trace_roots_only, sort and dir → sort_by, page → page, the columns → cols (keyed
// by the call field each column shows), and every filter (q, op, status, model, feedback, text,
// from, to) → query, the one calls query the table runs, so that the SDK's view.get_calls()
// answers the calls the table shows. (The table's op filter is a part of the name, not an op
// ref as filter.op_names holds, so it is in query too.) The table's query string is kept
// whole in definition.hone_studio, so that the view comes back exactly as it was saved.
import { tr } from './api.js';

// VIEW_COLS maps the table's columns to the keys of definition.cols: the call field each one
// shows (its sort field where it has one).
export const VIEW_COLS = {
  name: 'summary.weave.trace_name', status: 'summary.weave.status', input: 'inputs', output: 'output', model: 'inputs.model',
  start: 'started_at', latency: 'summary.weave.latency_ms', tokens: 'summary.weave.total_tokens', cost: 'summary.weave.total_cost',
  feedback: 'summary.weave.feedback', id: 'id',
};

// listViews answers the project's trace views, by label: {id (the object id), label, val}.
export async function listViews(pid) {
  const { objs } = await tr('/objs/query', { project_id: pid, filter: { base_object_classes: ['SavedView'], latest_only: true }, limit: 1000 });
  return objs.filter((o) => o.val && typeof o.val === 'object' && (o.val.view_type || 'traces') === 'traces')
    .map((o) => ({ id: o.object_id, label: typeof o.val.label === 'string' && o.val.label ? o.val.label : o.object_id, val: o.val }))
    .sort((a, b) => a.label.localeCompare(b.label) || a.id.localeCompare(b.id));
}

// readView answers one view by its object id (its latest version), or null.
export async function readView(pid, id) {
  try {
    const { obj } = await tr('/obj/read', { project_id: pid, object_id: id, digest: 'latest' });
    return obj && obj.val ? { id, label: obj.val.label || id, val: obj.val } : null;
  } catch (e) {
    if (e.status === 404) return null;
    throw e;
  }
}

// saveView writes a view as a new version of the object id (a new view: a new id).
// state: {label, search (the table's query string), columns (shown column keys), query (the
// table's calls query, or undefined), all, sort, dir, page, pageSize}.
export function saveView(pid, id, s) {
  const cols = Object.fromEntries(Object.entries(VIEW_COLS).map(([k, field]) => [field, s.columns.includes(k)]));
  const definition = {
    filter: { trace_roots_only: !s.all },
    query: s.query || null,
    cols,
    sort_by: [{ field: s.sort, direction: s.dir }],
    page: s.page || 0,
    page_size: s.pageSize,
    hone_studio: { search: s.search, columns: s.columns },
  };
  const val = { _type: 'SavedView', name: s.label, description: null, view_type: 'traces', label: s.label, definition, _class_name: 'SavedView', _bases: ['BaseObject', 'BaseModel'] };
  return tr('/obj/create', { obj: { project_id: pid, object_id: id, val } });
}

// deleteView deletes every version of a view.
export const deleteView = (pid, id) => tr('/obj/delete', { project_id: pid, object_id: id });

export const newViewID = () => 'traces_' + crypto.randomUUID();

// strip removes the keys the Python SDK adds to the pydantic models it saves (_type,
// _class_name, _bases), which are no part of a calls query.
function strip(v) {
  if (Array.isArray(v)) return v.map(strip);
  if (!v || typeof v !== 'object') return v;
  return Object.fromEntries(Object.entries(v).filter(([k]) => k !== '_type' && k !== '_class_name' && k !== '_bases').map(([k, x]) => [k, strip(x)]));
}

// FILTER_FIELDS are the id lists of a calls filter and the call field each one matches.
const FILTER_FIELDS = { call_ids: 'id', trace_ids: 'trace_id', parent_ids: 'parent_id', thread_ids: 'thread_id', turn_ids: 'turn_id', wb_user_ids: 'wb_user_id', wb_run_ids: 'wb_run_id' };

// viewTarget answers where a view opens: {search (the table's query string), columns (the
// shown column keys, or null), cols (columns to show or hide, the others as they are; or
// null), left (what of the definition the table cannot apply)}.
// A view saved here opens exactly as it was saved; another (the SDKs', Weave's) by what maps:
// trace_roots_only, the filter's op names and id lists and the query as the table's query (q),
// the first sort key, the page, the columns by cols.
export function viewTarget(val) {
  const d = strip((val && val.definition) || {});
  const own = d.hone_studio;
  if (own && typeof own.search === 'string') {
    return { search: own.search, columns: Array.isArray(own.columns) ? own.columns : null, cols: null, left: [] };
  }
  const p = new URLSearchParams();
  const left = [];
  const f = d.filter || {};
  if (f.trace_roots_only === false) p.set('all', '1');
  const and = [];
  const field = (n) => ({ $getField: n });
  const lit = (x) => ({ $literal: x });
  if (Array.isArray(f.op_names) && f.op_names.length) {
    const ors = f.op_names.map((n) => (n.endsWith(':*') ? { $contains: { input: field('op_name'), substr: lit(n.slice(0, -1)) } } : { $eq: [field('op_name'), lit(n)] }));
    and.push(ors.length === 1 ? ors[0] : { $or: ors });
  }
  for (const [k, col] of Object.entries(FILTER_FIELDS)) {
    if (Array.isArray(f[k]) && f[k].length) and.push({ $in: [field(col), f[k].map(lit)] });
  }
  for (const k of ['input_refs', 'output_refs']) if (Array.isArray(f[k]) && f[k].length) left.push('filter.' + k);
  if (d.query && d.query.$expr) and.push(d.query.$expr);
  if (and.length) p.set('q', JSON.stringify({ $expr: and.length === 1 ? and[0] : { $and: and } }));
  const sorts = Array.isArray(d.sort_by) ? d.sort_by : [];
  if (sorts[0] && sorts[0].field) {
    if (sorts[0].field !== 'started_at') p.set('sort', sorts[0].field);
    if ((sorts[0].direction || 'asc') !== 'desc') p.set('dir', sorts[0].direction || 'asc');
  }
  if (sorts.length > 1) left.push('sort_by after the first key');
  if (Array.isArray(d.expand_columns) && d.expand_columns.length) left.push('expand_columns');
  if (d.page) p.set('page', String(d.page));
  // cols: the columns it names shown or hidden, the others as they are.
  let cols = null;
  if (d.cols && typeof d.cols === 'object') {
    const byField = Object.fromEntries(Object.entries(VIEW_COLS).map(([k, v]) => [v, k]));
    for (const [c, on] of Object.entries(d.cols)) if (byField[c]) (cols = cols || {})[byField[c]] = !!on;
  }
  const s = p.toString();
  return { search: s ? '?' + s : '', columns: null, cols, left };
}
