// Training: models and their base, jobs with live status and events (SSE), curves drawn from
// the jobs' gradient_step events and the checkpoints' metrics (uPlot: drag to zoom, double
// click to reset; a model's runs overlaid), checkpoints with deletion and a chat link.
import uPlot from './vendor/uPlot.esm.js';
import { v1, sse } from './api.js';
import { h, clear, enc, jsonView, fmtTime, fmtNum, errorBox, loading } from './dom.js';
import { projectBase, onTeardown } from './app.js';
import { keyRows } from './traces.js';

const FINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const COLORS = ['#d98e04', '#2f7bd8', '#2aa36b', '#c2417a', '#7c5cd6', '#cc5a2a', '#1a9aa0', '#888'];
const GROUPS = [['loss', /(^|\/)loss$/], ['reward', /reward/], ['grad_norm', /grad_norm/], ['learning_rate', /(^|_)lr$|learning_rate/]];

const jobBadge = (s) => h('span.badge.st-' + String(s).toLowerCase(), { 'data-status': s }, s);
const modelPath = (id) => id.split('/').map(enc).join('/');

async function allJobs(modelID) {
  const out = [];
  let before = '';
  for (let i = 0; i < 10; i++) {
    const r = await v1('GET', `/v1/preview/training-jobs?limit=100&model_id=${enc(modelID)}${before ? '&before=' + enc(before) : ''}`);
    out.push(...r.data);
    if (!r.has_more) break;
    before = r.last_id;
  }
  return out;
}

export async function trainingView(root, [entity, project]) {
  const { data } = await v1('GET', '/v1/preview/models?limit=100');
  const models = data.filter((m) => m.entity === entity && m.project === project);
  root.append(h('h1', {}, 'Training ', h('span.muted', {}, `${entity}/${project}`)));
  if (!models.length) root.append(h('p.muted', {}, 'No trainable models in this project (hone train sft --model ', `${entity}/${project}/agent`, ' …).'));
  else root.append(h('table.grid', {}, h('thead', {}, h('tr', {}, ['Model', 'Base', 'Created'].map((x) => h('th', {}, x)))),
    h('tbody', {}, models.map((m) => h('tr', {}, h('td', {}, h('a', { href: `${projectBase()}/training/models/${enc(m.name)}` }, m.name)), h('td', {}, h('code', {}, m.base_model)), h('td', {}, fmtTime(m.created_at)))))));
  const jobsEl = h('div');
  root.append(h('h2', {}, 'Jobs'), jobsEl);
  const draw = async () => {
    const jobs = (await Promise.all(models.map((m) => allJobs(m.id)))).flat().sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    clear(jobsEl, jobsTable(jobs, models));
    return jobs;
  };
  const jobs = await draw();
  if (jobs.some((j) => !FINAL.has(j.status))) {
    const t = setInterval(() => draw().catch(() => {}), 2000);
    onTeardown(() => clearInterval(t));
  }
}

function jobsTable(jobs, models) {
  if (!jobs.length) return h('p.muted', {}, 'No jobs yet.');
  const name = (id) => (models.find((m) => m.id === id) || { name: id }).name;
  const t = h('table.grid', {}, h('thead', {}, h('tr', {}, ['Job', 'Model', 'Kind', 'Status', 'Step', 'Created', 'Finished'].map((x) => h('th', {}, x)))),
    h('tbody', {}, jobs.map((j) => {
      const href = `${projectBase()}/training/jobs/${enc(j.id)}`;
      return h('tr.row', { 'data-href': href }, h('td', {}, h('a', { href }, j.id)), h('td', {}, name(j.model_id)), h('td', {}, j.kind),
        h('td', {}, jobBadge(j.status)), h('td.num', {}, j.step ?? ''), h('td', {}, fmtTime(j.created_at)), h('td', {}, fmtTime(j.finished_at)));
    })));
  keyRows(t);
  return t;
}

// chart draws series {label: [[x, y], ...]} in el with uPlot and returns an update function.
function chart(el, title) {
  let u = null;
  let labels = [];
  const css = getComputedStyle(document.documentElement);
  const fg = css.getPropertyValue('--muted').trim() || '#888';
  const grid = css.getPropertyValue('--line').trim() || '#ddd';
  const box = h('div.chart', { 'data-chart': title }, h('div.charttitle', {}, title));
  el.append(box);
  return (series) => {
    const names = Object.keys(series);
    const xs = [...new Set(names.flatMap((n) => series[n].map((p) => p[0])))].sort((a, b) => a - b);
    const data = [xs, ...names.map((n) => { const m = new Map(series[n]); return xs.map((x) => (m.has(x) ? m.get(x) : null)); })];
    box.dataset.points = String(xs.length);
    if (!u || names.join('\n') !== labels.join('\n')) {
      if (u) u.destroy();
      labels = names;
      u = new uPlot({
        width: Math.max(280, Math.min(560, (el.clientWidth || 600) / 2 - 16)), height: 220,
        scales: { x: { time: false } }, cursor: { drag: { x: true, y: false } },
        series: [{ label: 'step' }, ...names.map((n, i) => ({ label: n, stroke: COLORS[i % COLORS.length], width: 2, spanGaps: true, points: { size: 5 } }))],
        axes: [{ stroke: fg, grid: { stroke: grid } }, { stroke: fg, grid: { stroke: grid }, size: 60 }],
      }, data, box);
    } else u.setData(data);
  };
}

// curves groups numeric metrics into the charts (loss, reward, grad norm, learning rate, others).
function groupOf(metric) {
  for (const [g, re] of GROUPS) if (re.test(metric)) return g;
  return 'other';
}

export async function jobView(root, [entity, project, id]) {
  const job = await v1('GET', `/v1/preview/training-jobs/${enc(id)}`);
  const model = await v1('GET', `/v1/preview/models/${modelPath(job.model_id)}`).catch(() => null);
  const modelName = model ? `${model.entity}/${model.project}/${model.name}` : job.model_id;
  const head = h('div');
  const charts = h('div.charts');
  const events = h('tbody');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/training` }, 'Training'), ' / ', id), head, charts,
    h('h2', {}, 'Events'), h('div.tablewrap.events', {}, h('table.grid', {}, h('thead', {}, h('tr', {}, ['Time', 'Type', 'Data'].map((x) => h('th', {}, x)))), events)));
  const drawers = {};
  const points = {}; // group → metric → [[step, value]]
  let step = 0;
  let expected = 0;
  const progress = h('span#progress.muted');

  const drawHead = (j) => {
    clear(head, h('h1', {}, `${j.kind ? j.kind.toUpperCase() + ' ' : ''}job `, h('code', {}, j.id), ' ', jobBadge(j.status), ' ', progress),
      h('dl.meta', {}, h('dt', {}, 'Model'), h('dd', {}, model ? h('a', { href: `${projectBase()}/training/models/${enc(model.name)}` }, modelName) : j.model_id, model ? h('span.muted', {}, ` on ${model.base_model}`) : ''),
        h('dt', {}, 'Created'), h('dd', {}, fmtTime(j.created_at)), h('dt', {}, 'Started'), h('dd', {}, fmtTime(j.started_at)),
        h('dt', {}, 'Finished'), h('dd', {}, fmtTime(j.finished_at)),
        j.status === 'SUCCEEDED' && j.step ? [h('dt', {}, 'Checkpoint'), h('dd', {}, `step ${j.step} · `, h('a', { href: `/playground?model=${enc(modelName + ':step' + j.step)}` }, 'chat with this checkpoint'))] : ''),
      j.error_message ? h('div.exception#job-error', { role: 'alert' }, h('strong', {}, 'Failure'), h('pre', {}, j.error_message)) : '',
      !FINAL.has(j.status) ? h('button', { onclick: async () => { await v1('POST', `/v1/preview/training-jobs/${enc(id)}/cancel`); } }, 'Cancel job') : '');
  };
  drawHead(job);

  const onEvent = (e) => {
    events.append(h('tr', { 'data-type': e.type }, h('td', {}, fmtTime(e.created_at)), h('td', {}, e.type), h('td', {}, jsonView(e.data, 0))));
    if (e.type === 'training_started') expected = e.data.num_sequences || 0;
    if (e.type !== 'gradient_step') return;
    const prev = step;
    step = e.data.step ?? step + 1;
    // A job that ran again repeats steps (from its first, or from where it resumed): the
    // latest run's points replace the earlier run's from there on.
    if (step <= prev) for (const g of Object.values(points)) for (const k of Object.keys(g)) g[k] = g[k].filter(([x]) => x < step);
    for (const [k, v] of Object.entries(e.data || {})) {
      if (typeof v !== 'number' || k === 'step') continue;
      const g = groupOf(k);
      ((points[g] ||= {})[k] ||= []).push([step, v]);
    }
    progress.textContent = expected ? `${step} / ${expected} steps` : `${step} steps`;
  };
  const redraw = () => {
    for (const g of [...GROUPS.map((x) => x[0]), 'other']) {
      if (!points[g]) continue;
      drawers[g] ||= chart(charts, g);
      drawers[g](points[g]);
    }
  };

  let after = '';
  for (let i = 0; i < 100; i++) {
    const r = await v1('GET', `/v1/preview/training-jobs/${enc(id)}/events?limit=100${after ? '&after=' + enc(after) : ''}`);
    r.data.forEach(onEvent);
    redraw(); // each page drawn as it arrives: a long job's curves show at once and fill in
    if (r.data.length) after = r.last_id;
    if (!r.has_more) break;
  }
  if (!FINAL.has(job.status)) {
    const ctl = new AbortController();
    onTeardown(() => ctl.abort());
    let pending = false;
    sse(`/v1/preview/training-jobs/${enc(id)}/events${after ? '?after=' + enc(after) : ''}`, undefined, (m) => {
      if (m.data === '[DONE]') return;
      onEvent(JSON.parse(m.data));
      if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; redraw(); }); }
      if (['training_ended', 'training_failed', 'gradient_step'].includes(m.event) || m.event === 'training_started') {
        v1('GET', `/v1/preview/training-jobs/${enc(id)}`).then(drawHead).catch(() => {});
      }
    }, ctl.signal).then(() => v1('GET', `/v1/preview/training-jobs/${enc(id)}`).then(drawHead)).catch((e) => { if (e.name !== 'AbortError') head.append(errorBox(e)); });
  }
}

export async function modelView(root, [entity, project, name]) {
  const id = `${entity}/${project}/${name}`;
  const m = await v1('GET', `/v1/preview/models/${modelPath(id)}`);
  const cps = h('div');
  const charts = h('div.charts');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/training` }, 'Training'), ' / ', name),
    h('h1', {}, name, ' ', h('span.muted', {}, 'on ', h('code', {}, m.base_model))),
    h('p', {}, h('a', { href: `/playground?model=${enc(id)}` }, 'Chat with the latest checkpoint')),
    h('h2', {}, 'Curves'), charts, h('h2', {}, 'Checkpoints'), cps);

  const loadCps = () => loading(cps, async () => {
    const { data } = await v1('GET', `/v1/preview/models/${modelPath(id)}/checkpoints?limit=100&order=asc`);
    if (!data.length) return h('p.muted', {}, 'No checkpoints yet.');
    const metricNames = [...new Set(data.flatMap((c) => Object.keys(c.metrics || {})))].sort();
    // Checkpoint metrics (the jobs' and /log's) over the steps.
    const groups = {};
    for (const c of data) for (const [k, v] of Object.entries(c.metrics || {})) ((groups[groupOf(k)] ||= {})[k] ||= []).push([c.step, v]);
    clear(charts);
    for (const [g, s] of Object.entries(groups)) chart(charts, 'checkpoint ' + g)(s);
    return h('table.grid.checkpoints', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Step'), metricNames.map((k) => h('th', {}, k)), h('th', {}, 'Created'), h('th', {}, ''))),
      h('tbody', {}, data.map((c) => h('tr', { 'data-step': c.step }, h('td.num', {}, c.step), metricNames.map((k) => h('td.num', {}, c.metrics && c.metrics[k] !== undefined ? +c.metrics[k].toPrecision(5) : '')),
        h('td', {}, fmtTime(c.created_at)),
        h('td', {}, h('a', { href: `/playground?model=${enc(id + ':step' + c.step)}` }, 'chat'), ' ',
          h('button.link.danger', { onclick: async () => {
            if (!confirm(`Delete checkpoint step ${c.step} of ${id}?`)) return;
            await v1('DELETE', `/v1/preview/models/${modelPath(id)}/checkpoints`, { steps: [c.step] });
            loadCps();
          } }, 'delete'))))));
  });
  await loadCps();

  // Every job's loss overlaid, one series per run.
  const jobs = (await allJobs(id)).filter((j) => j.status !== 'QUEUED').slice(0, 8);
  const runs = {};
  await Promise.all(jobs.map(async (j) => {
    let i = 0;
    let after = '';
    const pts = [];
    for (let page = 0; page < 100; page++) {
      const r = await v1('GET', `/v1/preview/training-jobs/${enc(j.id)}/events?limit=100${after ? '&after=' + enc(after) : ''}`);
      for (const e of r.data) {
        if (e.type !== 'gradient_step' || typeof e.data.loss !== 'number') continue;
        const x = e.data.step ?? ++i;
        while (pts.length && pts[pts.length - 1][0] >= x) pts.pop(); // a run again: the latest run's points
        pts.push([x, e.data.loss]);
      }
      if (!r.has_more) break;
      after = r.last_id;
    }
    if (pts.length) runs[`${j.id.slice(-6)} loss`] = pts;
  }));
  if (Object.keys(runs).length) chart(charts, 'loss by run')(runs);
}
