// Objects and datasets: the project's objects in tabs by kind (Datasets, Models, Evaluations,
// Prompts, Ops) with a search; an object's versions with a diff between two, the calls that use
// it, an op's source code; table rows (a Dataset's rows) in a sortable, paged grid.
import { tr, calls, fileContent } from './api.js';
import { h, clear, enc, jsonView, fmtTime, fmtNum, refHref, loading, emptyState, plural, copyButton, spinner, STALE } from './dom.js';
import { setQuery, projectBase } from './app.js';
import { keyRows, opName, statusOf, statusBadge } from './traces.js';

const PAGE = 50;

// KINDS: the tabs, each with its objs/query filter.
const KINDS = [
  ['all', 'All', {}],
  ['datasets', 'Datasets', { base_object_classes: ['Dataset'] }],
  ['models', 'Models', { base_object_classes: ['Model'] }],
  ['evaluations', 'Evaluations', { base_object_classes: ['Evaluation'] }],
  ['prompts', 'Prompts', { base_object_classes: ['Prompt', 'StringPrompt', 'MessagesPrompt', 'EasyPrompt'] }],
  ['ops', 'Ops', { is_op: true }],
];

export async function objectsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  const kind = KINDS.find((k) => k[0] === q.get('kind')) || KINDS[0];
  let page = +(q.get('page') || 0);
  let text = q.get('q') || '';
  const tabs = h('nav.tabs', { 'aria-label': 'Kinds of objects' }, KINDS.map(([k, label]) => h('a' + (k === kind[0] ? '.active' : ''), {
    href: `${projectBase()}/weave/objects${k === 'all' ? '' : '?kind=' + k}`, 'aria-current': k === kind[0] ? 'page' : undefined, 'data-kind': k }, label)));
  const list = h('div', {}, spinner('Loading objects…'));
  const search = h('input#objects-search', { type: 'search', placeholder: 'Search by name', 'aria-label': 'Search objects by name', 'data-filter': true, value: text,
    oninput: () => { text = search.value.trim(); page = 0; setQuery({ q: text, page: '' }); draw(); } });
  let objs = null; // until read: a search typed meanwhile applies once they are
  root.append(h('h1', {}, 'Objects ', h('span.muted', {}, pid)), tabs, h('div.toolbar', {}, search, h('span.muted#objects-count')), list);
  // The kind's latest versions (names and classes only), searched and paged here.
  objs = (await tr('/objs/query', { project_id: pid, filter: { latest_only: true, ...kind[2] }, sort_by: [{ field: 'created_at', direction: 'desc' }], limit: 1000, metadata_only: true })).objs;
  function draw() {
    if (!objs) return;
    const hits = text ? objs.filter((o) => o.object_id.toLowerCase().includes(text.toLowerCase())) : objs;
    document.getElementById('objects-count').textContent = ' ' + plural(hits.length, 'object') + (objs.length === 1000 ? ' (the newest 1,000)' : '');
    if (!hits.length) {
      clear(list, emptyState(text ? h('p', {}, `No ${kind[1].toLowerCase()} named like "${text}".`)
        : kind[0] === 'all' ? [h('p', {}, 'No objects yet.'), h('p', {}, 'Publish with the Weave SDK (', h('code', {}, 'weave.publish(obj, name="...")'), '), or build a dataset from traced calls in the calls table.')]
          : h('p', {}, `No ${kind[1].toLowerCase()} in this project yet.`)));
      return;
    }
    const pages = Math.ceil(hits.length / PAGE);
    page = Math.min(page, pages - 1);
    const t = h('table.grid.objects', {}, h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Class', 'Versions', 'Latest'].map((x) => h('th', {}, x)))),
      h('tbody', {}, hits.slice(page * PAGE, page * PAGE + PAGE).map((o) => {
        const href = `${projectBase()}/weave/objects/${enc(o.object_id)}`;
        return h('tr.row', { 'data-href': href }, h('td', {}, h('a', { href }, o.object_id)), h('td', {}, o.kind),
          h('td', {}, o.leaf_object_class || o.base_object_class || ''), h('td.num', {}, o.version_index + 1), h('td', {}, fmtTime(o.created_at)));
      })));
    keyRows(t);
    const go = (p) => { page = p; setQuery({ page: p || '' }, true); draw(); };
    clear(list, h('div.tablewrap', {}, t), pages > 1 ? h('div.pager', {},
      h('button', { type: 'button', disabled: page === 0, onclick: () => go(page - 1), 'aria-label': 'Previous page' }, '‹'), ` page ${page + 1} of ${pages} `,
      h('button', { type: 'button', disabled: page + 1 >= pages, onclick: () => go(page + 1), 'aria-label': 'Next page' }, '›')) : '');
  }
  draw();
}

// flat maps every leaf of v to its dotted path.
function flat(v, p = '', out = new Map()) {
  if (v && typeof v === 'object') {
    const entries = Array.isArray(v) ? v.map((x, i) => [i, x]) : Object.entries(v);
    if (!entries.length) out.set(p, Array.isArray(v) ? '[]' : '{}');
    for (const [k, x] of entries) flat(x, p ? `${p}.${k}` : String(k), out);
  } else out.set(p, JSON.stringify(v));
  return out;
}

function diffView(a, b) {
  const fa = flat(a), fb = flat(b);
  const keys = [...new Set([...fa.keys(), ...fb.keys()])].sort();
  const rows = [];
  for (const k of keys) {
    const x = fa.get(k), y = fb.get(k);
    if (x === y) continue;
    const kind = x === undefined ? 'added' : y === undefined ? 'removed' : 'changed';
    rows.push(h('tr.' + kind, {}, h('td', {}, h('code', {}, k)), h('td.old', {}, x ?? ''), h('td.new', {}, y ?? ''), h('td', {}, kind)));
  }
  if (!rows.length) return h('p.muted', {}, 'The two versions are the same.');
  return h('div.tablewrap', {}, h('table.grid.diff', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Path'), h('th', {}, 'Old'), h('th', {}, 'New'), h('th', {}, ''))), h('tbody', {}, rows)));
}

export async function objectView(root, [entity, project, name], q) {
  const pid = `${entity}/${project}`;
  const { objs } = await tr('/objs/query', { project_id: pid, filter: { object_ids: [name], latest_only: false }, sort_by: [{ field: 'created_at', direction: 'desc' }], metadata_only: true, limit: 1000 });
  if (!objs.length) {
    root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave/objects` }, 'Objects'), ' / ', name),
      emptyState(h('p', {}, `There is no object named ${name} in ${pid} (it may have been deleted).`), h('p', {}, h('a', { href: `${projectBase()}/weave/objects` }, 'See the project\'s objects'))));
    return;
  }
  let digest = q.get('v') || objs[0].digest;
  if (/^v\d+$/.test(digest) || digest === 'latest') {
    const r = await tr('/obj/read', { project_id: pid, object_id: name, digest });
    digest = r.obj.digest;
  }
  const isOp = objs[0].kind === 'op';
  const body = h('div.objbody');
  const versions = h('table.grid', {}, h('thead', {}, h('tr', {}, ['', 'Version', 'Digest', 'Created', 'Diff'].map((x) => h('th', {}, x)))),
    h('tbody', {}, objs.map((o) => h('tr' + (o.digest === digest ? '.sel' : ''), {},
      h('td', {}, o.is_latest ? h('span.badge', {}, 'latest') : ''),
      h('td', {}, h('a', { href: `?v=${enc(o.digest)}` }, `v${o.version_index}`)),
      h('td', {}, h('code', {}, o.digest.slice(0, 12))), h('td', {}, fmtTime(o.created_at)),
      h('td', {}, o.digest !== digest ? h('a', { href: `?v=${enc(digest)}&diff=${enc(o.digest)}` }, 'diff with this') : '')))));
  const usedBy = h('div#used-by');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave/objects${isOp ? '?kind=ops' : ''}` }, 'Objects'), ' / ', name),
    h('h1', {}, name, ' ', h('span.muted', {}, isOp ? 'op' : objs[0].leaf_object_class || objs[0].base_object_class || 'object')),
    h('div.split2', {}, h('div', {}, h('h3', {}, 'Versions'), h('div.tablewrap', {}, versions), h('h3', {}, isOp ? 'Calls of this op' : 'Used by'), usedBy), body));
  loading(usedBy, () => usedByView(pid, name, isOp, objs), 'Finding the calls…');
  const obj = (await tr('/obj/read', { project_id: pid, object_id: name, digest })).obj;
  const other = q.get('diff');
  if (other) {
    const o2 = (await tr('/obj/read', { project_id: pid, object_id: name, digest: other })).obj;
    const [older, newer] = o2.version_index < obj.version_index ? [o2, obj] : [obj, o2];
    body.append(h('h3', {}, `Diff v${older.version_index} → v${newer.version_index}`), diffView(older.val, newer.val));
  }
  const ref = `weave:///${pid}/${isOp ? 'op' : 'object'}/${name}:${obj.digest}`;
  body.append(h('h3', {}, `v${obj.version_index} `, h('span.muted', {}, obj.leaf_object_class || obj.base_object_class || obj.kind), ' ', copyButton(ref, 'Copy ref')));
  // An op's source: the files it was saved with (obj.py), read from /file/content.
  const files = obj.val && typeof obj.val === 'object' && obj.val.files && typeof obj.val.files === 'object' ? Object.entries(obj.val.files) : [];
  if (files.length) {
    for (const [fname, fdigest] of files) {
      const code = h('div.source');
      body.append(h('h3', {}, 'Source ', h('code', {}, fname)), code);
      loading(code, async () => {
        const text = await fileContent(pid, fdigest);
        return [h('div.codehead', {}, copyButton(text, 'Copy')), h('pre.code.src#op-source', {}, h('code', {}, text))];
      }, 'Reading the source…');
    }
    body.append(h('details', {}, h('summary', {}, 'Stored value'), jsonView(obj.val, 2)));
  } else body.append(jsonView(obj.val, 2));
  const rows = obj.val && typeof obj.val.rows === 'string' && /\/table\/([^/]+)$/.exec(obj.val.rows);
  if (rows) {
    const grid = h('div');
    body.append(h('h3', {}, 'Rows'), grid);
    await tableGrid(grid, pid, rows[1], q);
  }
}

// usedByView lists the calls of an op, or the calls that took the object (any version) as an
// input, with a link to all of them in the calls table.
async function usedByView(pid, name, isOp, versions) {
  const filter = isOp ? { op_names: [`weave:///${pid}/op/${name}:*`] } : { input_refs: versions.slice(0, 100).map((o) => `weave:///${pid}/object/${name}:${o.digest}`) };
  const [rows, stats] = await Promise.all([
    calls({ project_id: pid, filter, sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 10, columns: ['id', 'op_name', 'display_name', 'started_at', 'ended_at', 'exception', 'summary'] }),
    tr('/calls/query_stats', { project_id: pid, filter }),
  ]);
  if (!rows.length) return h('p.muted', {}, isOp ? 'No calls of this op.' : 'No call took it as an input.');
  const all = isOp ? `${projectBase()}/weave?all=1&op=${enc(name)}`
    : `${projectBase()}/weave?all=1&q=${enc(JSON.stringify({ $expr: { $contains: { input: { $getField: 'inputs' }, substr: { $literal: `/object/${name}:` }, case_insensitive: false } } }))}`;
  return [h('ul.usedby', {}, rows.map((c) => h('li', {}, statusBadge(statusOf(c)), ' ', h('a', { href: `${projectBase()}/weave/calls/${enc(c.id)}` }, c.display_name || opName(c.op_name)),
    h('span.muted', {}, ' ' + fmtTime(c.started_at))))),
  h('p', {}, h('a#used-by-all', { href: all }, `All ${plural(stats.count, 'call')} in the calls table`))];
}

export async function tableView(root, [entity, project, digest], q) {
  const pid = `${entity}/${project}`;
  const grid = h('div');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave/objects` }, 'Objects'), ' / table ', h('code', {}, digest.slice(0, 12))), grid);
  await tableGrid(grid, pid, digest, q);
}

// tableGrid shows a table's rows, sorted and paged by the server (/table/query).
async function tableGrid(el, pid, digest, q) {
  const st = { page: +(q.get('page') || 0), sort: q.get('sort') || '', dir: q.get('dir') || 'asc' };
  const { count } = await tr('/table/query_stats', { project_id: pid, digest });
  let seq = 0; // only the newest of overlapping loads draws
  async function load(push = false) {
    const mine = ++seq;
    setQuery({ page: st.page || '', sort: st.sort, dir: st.sort && st.dir !== 'asc' ? st.dir : '' }, push);
    await loading(el, async () => {
      if (!count) return emptyState(h('p', {}, 'This table has no rows.'));
      const { rows } = await tr('/table/query', { project_id: pid, digest, limit: PAGE, offset: st.page * PAGE, sort_by: st.sort ? [{ field: st.sort, direction: st.dir }] : undefined });
      if (mine !== seq) return STALE;
      const cols = [];
      for (const r of rows) for (const k of Object.keys(r.val && typeof r.val === 'object' ? r.val : { value: 0 })) if (!cols.includes(k)) cols.push(k);
      const pages = Math.max(1, Math.ceil(count / PAGE));
      const head = h('tr', {}, h('th', {}, '#'), cols.map((c) => h('th.sortable' + (st.sort === c ? '.sorted' : ''), { 'aria-sort': st.sort === c ? (st.dir === 'asc' ? 'ascending' : 'descending') : 'none' },
        h('button.sortbtn', { type: 'button', onclick: () => { st.dir = st.sort === c && st.dir === 'asc' ? 'desc' : 'asc'; st.sort = c; st.page = 0; load(true); } },
          c, st.sort === c ? (st.dir === 'asc' ? ' ▲' : ' ▼') : ''))));
      const cell = (v) => {
        if (typeof v === 'string') return v.startsWith('weave:///') && refHref(v) ? h('a', { href: refHref(v) }, v) : v;
        if (v && typeof v === 'object') return Array.isArray(v) && v.every((m) => m && m.role) ? h('span.muted', {}, `${plural(v.length, 'message')}: `, String(v[v.length - 1].content || '').slice(0, 80)) : jsonView(v, 0);
        return v === undefined ? '' : JSON.stringify(v);
      };
      return [h('div.pager', {}, h('span', { id: 'rows-count' }, plural(count, 'row')), h('span.spacer'),
        h('button', { type: 'button', disabled: st.page === 0, onclick: () => { st.page--; load(true); }, 'aria-label': 'Previous page' }, '‹'), ` page ${st.page + 1} of ${fmtNum(pages)} `,
        h('button', { type: 'button', disabled: st.page + 1 >= pages, onclick: () => { st.page++; load(true); }, 'aria-label': 'Next page' }, '›')),
      h('div.tablewrap', {}, h('table.grid.rows', {}, h('thead', {}, head), h('tbody', {}, rows.map((r) => h('tr', {}, h('td.num', {}, r.original_index ?? ''),
        cols.map((c) => h('td', {}, cell(r.val && typeof r.val === 'object' ? r.val[c] : r.val)))))))),
      ];
    }, 'Loading rows…');
  }
  await load();
}
