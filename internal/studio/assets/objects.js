// Objects and datasets: the project's objects, an object's versions with a diff between two,
// and table rows (a Dataset's rows) in a sortable, paged grid.
import { tr } from './api.js';
import { h, clear, enc, jsonView, fmtTime, fmtNum, refHref, loading } from './dom.js';
import { setQuery, projectBase } from './app.js';
import { keyRows } from './traces.js';

const PAGE = 50;

export async function objectsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  const page = +(q.get('page') || 0);
  const { objs } = await tr('/objs/query', { project_id: pid, filter: { latest_only: true }, sort_by: [{ field: 'created_at', direction: 'desc' }], limit: PAGE + 1, offset: page * PAGE, metadata_only: true });
  root.append(h('h1', {}, 'Objects ', h('span.muted', {}, pid)));
  if (!objs.length) { root.append(h('p.muted', {}, 'No objects yet (weave.publish(...)).')); return; }
  const t = h('table.grid', {}, h('thead', {}, h('tr', {}, ['Name', 'Kind', 'Class', 'Versions', 'Latest'].map((x) => h('th', {}, x)))),
    h('tbody', {}, objs.slice(0, PAGE).map((o) => {
      const href = `${projectBase()}/weave/objects/${enc(o.object_id)}`;
      return h('tr.row', { 'data-href': href }, h('td', {}, h('a', { href }, o.object_id)), h('td', {}, o.kind),
        h('td', {}, o.leaf_object_class || o.base_object_class || ''), h('td.num', {}, o.version_index + 1), h('td', {}, fmtTime(o.created_at)));
    })));
  keyRows(t);
  root.append(t, h('div.pager', {},
    page > 0 ? h('a', { href: `?page=${page - 1}` }, '‹ newer') : '', ' ',
    objs.length > PAGE ? h('a', { href: `?page=${page + 1}` }, 'older ›') : ''));
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
  return h('table.grid.diff', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Path'), h('th', {}, 'Old'), h('th', {}, 'New'), h('th', {}, ''))), h('tbody', {}, rows));
}

export async function objectView(root, [entity, project, name], q) {
  const pid = `${entity}/${project}`;
  const { objs } = await tr('/objs/query', { project_id: pid, filter: { object_ids: [name], latest_only: false }, sort_by: [{ field: 'created_at', direction: 'desc' }], metadata_only: true, limit: 1000 });
  if (!objs.length) throw new Error(`No object ${name} in ${pid}`);
  let digest = q.get('v') || objs[0].digest;
  if (/^v\d+$/.test(digest) || digest === 'latest') {
    const r = await tr('/obj/read', { project_id: pid, object_id: name, digest });
    digest = r.obj.digest;
  }
  const body = h('div');
  const versions = h('table.grid', {}, h('thead', {}, h('tr', {}, ['', 'Version', 'Digest', 'Created', 'Diff'].map((x) => h('th', {}, x)))),
    h('tbody', {}, objs.map((o) => h('tr' + (o.digest === digest ? '.sel' : ''), {},
      h('td', {}, o.is_latest ? h('span.badge', {}, 'latest') : ''),
      h('td', {}, h('a', { href: `?v=${enc(o.digest)}` }, `v${o.version_index}`)),
      h('td', {}, h('code', {}, o.digest.slice(0, 12))), h('td', {}, fmtTime(o.created_at)),
      h('td', {}, o.digest !== digest ? h('a', { href: `?v=${enc(digest)}&diff=${enc(o.digest)}` }, 'diff with this') : '')))));
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/weave/objects` }, 'Objects'), ' / ', name),
    h('h1', {}, name), h('div.split2', {}, h('div', {}, h('h3', {}, 'Versions'), versions), body));
  const obj = (await tr('/obj/read', { project_id: pid, object_id: name, digest })).obj;
  const other = q.get('diff');
  if (other) {
    const o2 = (await tr('/obj/read', { project_id: pid, object_id: name, digest: other })).obj;
    const [older, newer] = o2.version_index < obj.version_index ? [o2, obj] : [obj, o2];
    body.append(h('h3', {}, `Diff v${older.version_index} → v${newer.version_index}`), diffView(older.val, newer.val));
  }
  body.append(h('h3', {}, `v${obj.version_index} `, h('span.muted', {}, obj.leaf_object_class || obj.base_object_class || obj.kind)), jsonView(obj.val, 2));
  const rows = obj.val && typeof obj.val.rows === 'string' && /\/table\/([^/]+)$/.exec(obj.val.rows);
  if (rows) {
    const grid = h('div');
    body.append(h('h3', {}, 'Rows'), grid);
    await tableGrid(grid, pid, rows[1], q);
  }
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
  async function load() {
    setQuery({ page: st.page || '', sort: st.sort, dir: st.sort && st.dir !== 'asc' ? st.dir : '' });
    await loading(el, async () => {
      const { rows } = await tr('/table/query', { project_id: pid, digest, limit: PAGE, offset: st.page * PAGE, sort_by: st.sort ? [{ field: st.sort, direction: st.dir }] : undefined });
      const cols = [];
      for (const r of rows) for (const k of Object.keys(r.val && typeof r.val === 'object' ? r.val : { value: 0 })) if (!cols.includes(k)) cols.push(k);
      const pages = Math.max(1, Math.ceil(count / PAGE));
      const head = h('tr', {}, h('th', {}, '#'), cols.map((c) => h('th.sortable' + (st.sort === c ? '.sorted' : ''), {
        onclick: () => { st.dir = st.sort === c && st.dir === 'asc' ? 'desc' : 'asc'; st.sort = c; st.page = 0; load(); },
      }, c, st.sort === c ? (st.dir === 'asc' ? ' ▲' : ' ▼') : '')));
      const cell = (v) => {
        if (typeof v === 'string') return v.startsWith('weave:///') && refHref(v) ? h('a', { href: refHref(v) }, v) : v;
        if (v && typeof v === 'object') return Array.isArray(v) && v.every((m) => m && m.role) ? h('span.muted', {}, `${v.length} messages: `, String(v[v.length - 1].content || '').slice(0, 80)) : jsonView(v, 0);
        return v === undefined ? '' : JSON.stringify(v);
      };
      return [h('div.pager', {}, h('span', { id: 'rows-count' }, `${fmtNum(count)} rows`), h('span.spacer'),
        h('button', { disabled: st.page === 0, onclick: () => { st.page--; load(); } }, '‹'), ` page ${st.page + 1} of ${pages} `,
        h('button', { disabled: st.page + 1 >= pages, onclick: () => { st.page++; load(); } }, '›')),
      h('div.tablewrap', {}, h('table.grid.rows', {}, h('thead', {}, head), h('tbody', {}, rows.map((r) => h('tr', {}, h('td.num', {}, r.original_index ?? ''),
        cols.map((c) => h('td', {}, cell(r.val && typeof r.val === 'object' ? r.val[c] : r.val)))))))),
      ];
    });
  }
  await load();
}
