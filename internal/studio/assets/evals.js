// Evaluations: the project's evaluation runs (Evaluation.evaluate calls) with their scorer
// summaries, and two or more runs compared against a baseline the user picks: each metric's Δ
// from the baseline, coloured by whether higher or lower is better for it, a chart per scorer,
// and the examples side by side, filtered to the regressions or improvements.
import { calls, tr } from './api.js';
import { h, clear, enc, fmtTime, loading, emptyState, plural } from './dom.js';
import { setQuery, projectBase } from './app.js';
import { opName, statusOf, statusBadge, keyRows } from './traces.js';
import { opHref } from './call.js';

function flatten(v, prefix = '', out = {}) {
  if (v && typeof v === 'object' && !Array.isArray(v)) {
    for (const [k, x] of Object.entries(v)) flatten(x, prefix ? `${prefix}.${k}` : k, out);
  } else out[prefix] = v;
  return out;
}

const runName = (c) => c.display_name || (c.inputs && typeof c.inputs.model === 'string' ? opName(c.inputs.model.replace('/object/', '/op/')) : '') || c.id.slice(-8);
const modelRef = (c) => (c.inputs && typeof c.inputs.model === 'string' ? c.inputs.model : '');

// Whether a higher value of a metric is better: by its name (latency, loss, errors, cost and
// time are better lower), unless the user turned it (kept in this browser).
const dirKey = 'hone.eval.lower';
const lowerSet = () => { try { return JSON.parse(localStorage.getItem(dirKey) || '{}'); } catch { return {}; } };
export function higherIsBetter(metric) {
  const o = lowerSet();
  if (metric in o) return !o[metric];
  return !/latency|loss|error|wrong|fail|cost|time|duration|tokens|perplexity|toxic|hallucinat|_ms$|\.ms$/i.test(metric);
}
function turn(metric) {
  const o = lowerSet();
  o[metric] = higherIsBetter(metric);
  localStorage.setItem(dirKey, JSON.stringify(o));
}

const asNum = (v) => (typeof v === 'boolean' ? +v : v);
// verdict compares a run's value with the baseline's: 'better', 'worse' or ''.
function verdict(metric, base, v) {
  const a = asNum(base), b = asNum(v);
  if (typeof a !== 'number' || typeof b !== 'number' || a === b || isNaN(a) || isNaN(b)) return '';
  return (b > a) === higherIsBetter(metric) ? 'better' : 'worse';
}
const fmtVal = (v) => (typeof v === 'number' ? String(+v.toFixed(6)) : v === undefined ? '—' : JSON.stringify(v));
const fmtDelta = (d) => (d > 0 ? '+' : d < 0 ? '−' : '±') + String(+Math.abs(d).toFixed(4));

export async function evaluationsView(root, [entity, project], q) {
  const pid = `${entity}/${project}`;
  const evals = await calls({ project_id: pid, filter: { trace_roots_only: false },
    query: { $expr: { $contains: { input: { $getField: 'op_name' }, substr: { $literal: 'Evaluation.evaluate' }, case_insensitive: false } } },
    sort_by: [{ field: 'started_at', direction: 'desc' }], limit: 200 });
  root.append(h('h1', {}, 'Evaluations ', h('span.muted', {}, pid)));
  if (!evals.length) {
    root.append(emptyState(h('p', {}, 'No evaluation runs yet.'), h('p', {}, 'Run one with the Weave SDK (',
      h('code', {}, 'await weave.Evaluation(dataset=..., scorers=[...]).evaluate(model)'), ') and it appears here, to compare with others.')));
    return;
  }
  const picked = new Set((q.get('compare') || '').split(',').filter(Boolean));
  let baseline = q.get('baseline') || '';
  const hint = h('span.muted#compare-hint');
  const compareBtn = h('button.primary#compare', { type: 'button', onclick: () => { setQuery({ compare: [...picked].join(','), baseline }, true); renderCompare(); } }, 'Compare');
  const drawHint = () => { compareBtn.disabled = picked.size < 2; hint.textContent = picked.size < 2 ? ' pick two or more runs' : ` ${picked.size} runs picked`; };
  const table = h('table.grid.evals', {}, h('thead', {}, h('tr', {}, h('th', {}, h('span.sr', {}, 'Pick')), h('th', {}, 'Run'), h('th', {}, 'Model'), h('th', {}, 'Started'), h('th', {}, 'Status'), h('th', {}, 'Scores'))),
    h('tbody', {}, evals.map((c) => {
      const scores = flatten(c.output || {});
      return h('tr.row', { 'data-href': `${projectBase()}/weave/calls/${enc(c.id)}`, 'data-id': c.id },
        h('td', {}, h('input', { type: 'checkbox', checked: picked.has(c.id), 'aria-label': 'Pick run ' + runName(c), onchange: (e) => { e.target.checked ? picked.add(c.id) : picked.delete(c.id); drawHint(); } })),
        h('td', {}, h('a', { href: `${projectBase()}/weave/calls/${enc(c.id)}` }, c.display_name || c.id.slice(-12))),
        h('td', {}, modelRef(c) ? h('a', { href: opHref(modelRef(c).replace('/object/', '/op/')) }, opName(modelRef(c).replace('/object/', '/op/'))) : ''),
        h('td', {}, fmtTime(c.started_at)), h('td', {}, statusBadge(statusOf(c))),
        h('td.scores', {}, Object.entries(scores).filter(([, v]) => typeof v === 'number' || typeof v === 'boolean').slice(0, 6).map(([k, v]) => h('span.score', {}, `${k} ${typeof v === 'number' ? +v.toFixed(4) : v}`))));
    })));
  keyRows(table, { pick: (row) => row.querySelector('input[type=checkbox]').click() });
  const cmp = h('div#comparison');
  drawHint();
  root.append(h('div.tablewrap', {}, table), h('p.toolbar', {}, compareBtn, hint), cmp);

  function renderCompare() {
    // Runs in the order they ran; the baseline first (the oldest unless the user picked one).
    const runs = evals.filter((c) => picked.has(c.id)).sort((a, b) => a.started_at.localeCompare(b.started_at));
    if (runs.length < 2) { clear(cmp); return; }
    if (!runs.some((r) => r.id === baseline)) baseline = runs[0].id;
    const base = runs.find((r) => r.id === baseline);
    const others = runs.filter((r) => r !== base);
    const ordered = [base, ...others];
    const flat = new Map(ordered.map((c) => [c.id, flatten(c.output || {})]));
    const keys = [...new Set(ordered.flatMap((c) => Object.keys(flat.get(c.id))))].sort();
    const baseSel = h('select#baseline', { 'aria-label': 'Baseline run', onchange: () => { baseline = baseSel.value; setQuery({ baseline }, true); renderCompare(); } },
      ordered.map((c) => h('option', { value: c.id, selected: c.id === baseline }, `${runName(c)} · ${fmtTime(c.started_at)}`)));
    const head = h('tr', {}, h('th', {}, 'Metric'), h('th', {}, 'Better'), h('th.num', {}, runName(base), h('span.badge.basebadge', {}, 'baseline')),
      others.map((c) => [h('th.num', {}, runName(c)), h('th.num', {}, 'Δ')]));
    const body = keys.map((k) => {
      const bv = flat.get(base.id)[k];
      const numeric = ordered.some((c) => typeof asNum(flat.get(c.id)[k]) === 'number');
      return h('tr', { 'data-metric': k }, h('td', {}, k),
        h('td', {}, numeric ? h('button.link.dir', { type: 'button', title: 'Turn: is a higher or a lower value better?', onclick: () => { turn(k); renderCompare(); } }, higherIsBetter(k) ? '↑ higher' : '↓ lower') : ''),
        h('td.num', {}, fmtVal(bv)),
        others.map((c) => {
          const v = flat.get(c.id)[k];
          const d = typeof asNum(v) === 'number' && typeof asNum(bv) === 'number' ? asNum(v) - asNum(bv) : null;
          const cls = verdict(k, bv, v);
          return [h('td.num' + (cls ? '.' + cls : ''), {}, fmtVal(v)),
            h('td.num.delta' + (cls ? '.' + cls : ''), { 'data-verdict': cls || 'same' }, d === null ? '' : fmtDelta(d), cls ? h('span.sr', {}, ` (${cls})`) : '')];
        }));
    });
    const charts = h('div.scorecharts', {}, keys.filter((k) => ordered.every((c) => typeof asNum(flat.get(c.id)[k]) === 'number' || flat.get(c.id)[k] === undefined)
      && ordered.some((c) => typeof asNum(flat.get(c.id)[k]) === 'number')).map((k) => {
      const vals = ordered.map((c) => asNum(flat.get(c.id)[k]));
      const max = Math.max(...vals.filter((v) => typeof v === 'number').map(Math.abs), 1e-12);
      return h('figure.scorechart', { 'data-metric': k }, h('figcaption', {}, k, h('span.muted', {}, higherIsBetter(k) ? ' ↑' : ' ↓')),
        ordered.map((c, i) => {
          const v = vals[i];
          const cls = i === 0 ? 'base' : verdict(k, vals[0], v);
          return h('div.barrow', {}, h('span.barlabel', { title: runName(c) }, runName(c)),
            h('span.bartrack', {}, h('span.barfill' + (cls ? '.' + cls : ''), { style: { width: typeof v === 'number' ? (100 * Math.abs(v) / max) + '%' : '0' } })),
            h('span.barval', {}, fmtVal(v)));
        }));
    }));
    clear(cmp, h('h2', {}, 'Compared with the baseline'),
      h('p.toolbar', {}, h('label', {}, 'Baseline ', baseSel), h('span.muted', {}, ' green: better than the baseline, red: worse (by whether higher or lower is better; turn a metric with its arrow)')),
      charts,
      h('div.tablewrap', {}, h('table.grid.compare', {}, h('thead', {}, head), h('tbody', {}, body))));
    const ex = h('div.examples-wrap');
    cmp.append(ex);
    loading(ex, async () => { const d = h('div'); await renderExamples(pid, ordered, d); return d; }, 'Loading the examples…');
  }
  renderCompare();
}

// ---- Per-example comparison ---------------------------------------------------------------

// stableJSON is JSON with object keys sorted, so that one example is one key in every run.
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

// renderExamples puts the runs' results side by side, one row per example (in any run): its
// row (read through its reference), each run's output, and each numeric or boolean score of
// each other run against the baseline's as "a → b", green where it is better, red where worse.
async function renderExamples(pid, runs, into) {
  const per = await Promise.all(runs.map((r) => examplesOf(pid, r)));
  const keys = [...new Set(per.flatMap((m) => [...m.keys()]))];
  if (!keys.length) { clear(into, emptyState(h('p', {}, 'None of these runs recorded per-example calls (Evaluation.predict_and_score).'))); return; }
  const rows = {};
  const refs = keys.filter((k) => k.startsWith('weave:///'));
  if (refs.length) {
    try {
      const r = await tr('/refs/read_batch', { refs: refs.slice(0, 1000) });
      refs.slice(0, 1000).forEach((k, i) => { rows[k] = r.vals[i]; });
    } catch { /* the references are shown as they are */ }
  }
  const scoreKeys = [...new Set(per.flatMap((m) => [...m.values()].flatMap((x) => Object.entries(x.scores)
    .filter(([, v]) => typeof v === 'number' || typeof v === 'boolean').map(([k]) => k))))].sort();
  const count = { differ: 0, worse: 0, better: 0 };
  const body = keys.map((key) => {
    const got = per.map((m) => m.get(key));
    const a = got[0];
    const ex = key in rows ? rows[key] : got.find(Boolean).example;
    let changed = got.some((x) => !x) || got.some((x) => stableJSON(x.output) !== stableJSON(a.output));
    let worse = false, better = false;
    const cells = [];
    for (const k of scoreKeys) {
      for (let i = 1; i < runs.length; i++) {
        const x = a ? a.scores[k] : undefined, y = got[i] ? got[i].scores[k] : undefined;
        const v = verdict(k, x, y);
        if (v) changed = true;
        if (v === 'worse') worse = true;
        if (v === 'better') better = true;
        cells.push(h('td.num' + (v ? '.' + v : ''), { 'data-score': k, 'data-run': runs[i].id }, `${fmtVal(x)} → ${fmtVal(y)}`, v ? h('span.sr', {}, ` (${v})`) : ''));
      }
    }
    if (changed) count.differ++;
    if (worse) count.worse++;
    if (better) count.better++;
    return h('tr', { class: [changed ? 'differs' : 'same', worse ? 'worse' : '', better ? 'better' : ''].filter(Boolean).join(' ') },
      h('td.example', { title: typeof ex === 'string' ? ex : JSON.stringify(ex) }, preview(ex, 120)),
      got.map((x) => h('td.out', {}, x ? h('a', { href: `${projectBase()}/weave/calls/${enc(x.call.id)}` }, preview(x.output)) : '—')),
      cells);
  });
  const table = h('table.grid.examples', {},
    h('thead', {}, h('tr', {}, h('th', {}, 'Example'), runs.map((c, i) => h('th', {}, 'Output: ' + runName(c) + (i === 0 ? ' (baseline)' : ''))),
      scoreKeys.flatMap((k) => runs.slice(1).map((c) => h('th.num', {}, runs.length > 2 ? `${k} · ${runName(c)}` : k))))),
    h('tbody', {}, body));
  const show = h('select#examples-filter', { 'aria-label': 'Which examples', onchange: () => { table.dataset.show = show.value; } },
    [['all', 'all examples'], ['differs', 'those that differ'], ['worse', 'regressions (worse than the baseline)'], ['better', 'improvements']].map(([v, l]) => h('option', { value: v }, l)));
  table.dataset.show = 'all';
  clear(into, h('h2', {}, 'By example'),
    h('p.toolbar', {}, h('span#examples-count', {}, `${plural(keys.length, 'example')}, ${count.differ} differ, ${count.worse} worse, ${count.better} better`), ' · ', h('label', {}, 'Show ', show)),
    h('div.tablewrap', {}, table));
}
