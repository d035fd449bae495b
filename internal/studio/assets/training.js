// Training: models and their base, jobs with live status and events (SSE), curves drawn from
// the jobs' gradient_step events and the checkpoints' metrics (smoothing, log scale, a spread
// band for RL rewards), jobs compared on one chart (one curve per run), checkpoints with
// deletion and a chat link.
import { v1, sse } from './api.js';
import { h, clear, enc, jsonView, fmtTime, fmtMs, errorBox, loading, emptyState, plural, confirmDialog, toast } from './dom.js';
import { projectBase, onTeardown, setQuery } from './app.js';
import { keyRows } from './traces.js';
import { lineChart, chartControls } from './chart.js';
import { loopSections } from './loop.js';

const FINAL = new Set(['SUCCEEDED', 'FAILED', 'CANCELLED']);
const GROUPS = [['loss', /(^|\/)loss$/], ['reward', /reward/], ['grad_norm', /grad_norm/], ['learning_rate', /(^|_)lr$|learning_rate/]];

const jobBadge = (s) => h('span.badge.st-' + String(s).toLowerCase(), { 'data-status': s }, s);
const modelPath = (id) => id.split('/').map(enc).join('/');
const short = (id) => id.slice(-8);

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

// jobSteps reads a job's gradient_step events: {metric: [[step, value], ...]}. A job that ran
// again repeats steps: the latest run's points replace the earlier run's from there on.
async function jobSteps(id) {
  const out = {};
  let after = '';
  let step = 0;
  for (let page = 0; page < 100; page++) {
    const r = await v1('GET', `/v1/preview/training-jobs/${enc(id)}/events?limit=100${after ? '&after=' + enc(after) : ''}`);
    for (const e of r.data) {
      if (e.type !== 'gradient_step') continue;
      const prev = step;
      step = e.data.step ?? step + 1;
      if (step <= prev) for (const k of Object.keys(out)) out[k] = out[k].filter(([x]) => x < step);
      for (const [k, v] of Object.entries(e.data || {})) if (typeof v === 'number' && k !== 'step') (out[k] ||= []).push([step, v]);
    }
    if (!r.has_more) break;
    after = r.last_id;
  }
  return out;
}

export async function trainingView(root, [entity, project], q) {
  const { data } = await v1('GET', '/v1/preview/models?limit=100');
  const models = data.filter((m) => m.entity === entity && m.project === project);
  root.append(h('h1', {}, 'Training ', h('span.muted', {}, `${entity}/${project}`)));
  if (!models.length) {
    root.append(emptyState(h('p', {}, 'No trainable models in this project yet.'),
      h('p', {}, 'Fine-tune one: ', h('code', {}, `hone train sft --model ${entity}/${project}/agent --base demo --file data.jsonl`), ', or build a dataset from traced calls (calls table → pick → Add to dataset).')));
    return;
  }
  root.append(h('div.tablewrap', {}, h('table.grid', {}, h('thead', {}, h('tr', {}, ['Model', 'Base', 'Created'].map((x) => h('th', {}, x)))),
    h('tbody', {}, models.map((m) => h('tr', {}, h('td', {}, h('a', { href: `${projectBase()}/training/models/${enc(m.name)}` }, m.name)), h('td', {}, h('code', {}, m.base_model)), h('td', {}, fmtTime(m.created_at))))))));
  const jobsEl = h('div');
  const picked = new Set((q.get('compare') || '').split(',').filter(Boolean));
  const cmp = h('div#job-compare');
  const ctl = chartControls();
  const compareBtn = h('button.primary#compare-jobs', { type: 'button', onclick: () => { setQuery({ compare: [...picked].join(',') }, true); compare(); } }, 'Compare picked jobs');
  root.append(h('h2', {}, 'Jobs'), h('p.toolbar', {}, compareBtn, h('span.muted', {}, ' pick two or more jobs: their curves on one chart')), jobsEl, cmp);
  let jobs = [];
  const draw = async () => {
    jobs = (await Promise.all(models.map((m) => allJobs(m.id)))).flat().sort((a, b) => (a.created_at < b.created_at ? 1 : -1));
    clear(jobsEl, h('div.tablewrap', {}, jobsTable(jobs, models, picked, () => { compareBtn.disabled = picked.size < 2; })));
    compareBtn.disabled = picked.size < 2;
    return jobs;
  };
  await draw();
  async function compare() {
    const ids = [...picked];
    if (ids.length < 2) { clear(cmp); return; }
    await loading(cmp, async () => {
      const steps = await Promise.all(ids.map(jobSteps));
      const metrics = [...new Set(steps.flatMap((s) => Object.keys(s)))].filter((k) => k !== 'attempt').sort((a, b) => rank(a) - rank(b) || a.localeCompare(b));
      const charts = h('div.charts');
      const out = [h('h2', {}, `${ids.length} jobs compared`), ctl.el, charts];
      setTimeout(() => {
        for (const k of metrics) {
          const series = {};
          ids.forEach((id, i) => { if (steps[i][k]) series[`${short(id)} ${k}`] = steps[i][k]; });
          if (Object.keys(series).length) lineChart(charts, k + ' by job', ctl)(series);
        }
      });
      return out;
    }, 'Reading the jobs\' steps…');
  }
  compare();
  if (jobs.some((j) => !FINAL.has(j.status))) {
    const t = setInterval(() => draw().catch(() => {}), 2000);
    onTeardown(() => clearInterval(t));
  }
}
const rank = (k) => { const i = GROUPS.findIndex(([, re]) => re.test(k)); return i < 0 ? 99 : i; };

function jobsTable(jobs, models, picked, onPick) {
  if (!jobs.length) return emptyState(h('p', {}, 'No jobs yet: start one with hone train sft or hone train rl.'));
  const name = (id) => (models.find((m) => m.id === id) || { name: id }).name;
  const dur = (j) => (j.started_at ? fmtMs((j.finished_at ? Date.parse(j.finished_at) : Date.now()) - Date.parse(j.started_at)) : '');
  const t = h('table.grid.jobs', {}, h('thead', {}, h('tr', {}, h('th', {}, h('span.sr', {}, 'Pick')), ['Job', 'Model', 'Kind', 'Status', 'Checkpoint', 'Duration', 'Created'].map((x) => h('th', {}, x)))),
    h('tbody', {}, jobs.map((j) => {
      const href = `${projectBase()}/training/jobs/${enc(j.id)}`;
      const m = models.find((x) => x.id === j.model_id);
      return h('tr.row', { 'data-href': href, 'data-id': j.id },
        h('td', {}, h('input', { type: 'checkbox', 'aria-label': 'Pick job ' + j.id, checked: picked.has(j.id), onchange: (e) => { e.target.checked ? picked.add(j.id) : picked.delete(j.id); onPick(); } })),
        h('td', {}, h('a', { href }, j.id)), h('td', {}, name(j.model_id)), h('td', {}, j.kind),
        h('td', {}, jobBadge(j.status)),
        // The checkpoint the job saved (its model's step N), not a count of gradient steps.
        h('td', {}, j.step && j.status === 'SUCCEEDED' && m ? h('a', { href: `/playground?model=${enc(`${m.entity}/${m.project}/${m.name}:step${j.step}`)}`, title: 'Chat with this checkpoint' }, `step ${j.step}`) : ''),
        h('td.num', {}, dur(j)), h('td', {}, fmtTime(j.created_at)));
    })));
  keyRows(t, { pick: (row) => row.querySelector('input[type=checkbox]').click() });
  return t;
}

// groupOf puts a metric in its chart: loss, reward, grad norm, learning rate; any other metric
// has a chart of its own (its own axis: attempt and tokens_per_second do not share one).
function groupOf(metric) {
  for (const [g, re] of GROUPS) if (re.test(metric)) return g;
  return metric;
}

export async function jobView(root, [entity, project, id]) {
  const job = await v1('GET', `/v1/preview/training-jobs/${enc(id)}`);
  const model = await v1('GET', `/v1/preview/models/${modelPath(job.model_id)}`).catch(() => null);
  const modelName = model ? `${model.entity}/${model.project}/${model.name}` : job.model_id;
  const head = h('div');
  const ctl = chartControls();
  const charts = h('div.charts');
  const events = h('tbody');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/training` }, 'Training'), ' / ', id), head, ctl.el, charts,
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
      !FINAL.has(j.status) ? h('button#cancel-job', { type: 'button', onclick: async (e) => {
        if (!await confirmDialog(`Cancel job ${j.id}? It stops at its next step and saves no checkpoint.`, 'Cancel job')) return;
        e.target.disabled = true;
        try { drawHead(await v1('POST', `/v1/preview/training-jobs/${enc(id)}/cancel`)); } catch (err) { e.target.disabled = false; toast(err, 'error'); }
      } }, 'Cancel job') : '');
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
    progress.textContent = expected ? `${step} / ${expected} steps` : plural(step, 'step');
  };
  const order = (g) => { const i = GROUPS.findIndex((x) => x[0] === g); return i < 0 ? 99 : i; };
  const redraw = () => {
    for (const g of Object.keys(points).sort((a, b) => order(a) - order(b) || a.localeCompare(b))) {
      drawers[g] ||= lineChart(charts, g, ctl);
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
  if (!Object.keys(points).length) charts.append(emptyState(h('p', {}, FINAL.has(job.status) ? 'This job recorded no training steps.' : 'The curves appear with the job\'s first step.')));
  if (!FINAL.has(job.status)) {
    const ac = new AbortController();
    onTeardown(() => ac.abort());
    let pending = false;
    let lastHead = 0;
    sse(`/v1/preview/training-jobs/${enc(id)}/events${after ? '?after=' + enc(after) : ''}`, undefined, (m) => {
      if (m.data === '[DONE]') return;
      onEvent(JSON.parse(m.data));
      const empty = charts.querySelector('.empty');
      if (empty && Object.keys(points).length) empty.remove();
      if (!pending) { pending = true; requestAnimationFrame(() => { pending = false; redraw(); }); }
      // The job's status again: at its start and end, and at most every 2 s while it steps.
      if (['training_ended', 'training_failed', 'training_started'].includes(m.event) || (m.event === 'gradient_step' && Date.now() - lastHead > 2000)) {
        lastHead = Date.now();
        v1('GET', `/v1/preview/training-jobs/${enc(id)}`).then(drawHead).catch(() => {});
      }
    }, ac.signal).then(() => v1('GET', `/v1/preview/training-jobs/${enc(id)}`).then(drawHead)).catch((e) => { if (e.name !== 'AbortError') head.append(errorBox(e)); });
  }
}

export async function modelView(root, [entity, project, name]) {
  const id = `${entity}/${project}/${name}`;
  const m = await v1('GET', `/v1/preview/models/${modelPath(id)}`);
  const cps = h('div');
  const ctl = chartControls();
  const charts = h('div.charts');
  root.append(h('div.crumbs', {}, h('a', { href: `${projectBase()}/training` }, 'Training'), ' / ', name),
    h('h1', {}, name, ' ', h('span.muted', {}, 'on ', h('code', {}, m.base_model))),
    h('p', {}, h('a', { href: `/playground?model=${enc(id)}` }, 'Chat with the latest checkpoint')),
    h('h2', {}, 'Curves'), ctl.el, charts, h('h2', {}, 'Checkpoints'), cps);

  let cpCharts = [];
  const loadCps = () => loading(cps, async () => {
    const [{ data }, aliases] = await Promise.all([v1('GET', `/v1/preview/models/${modelPath(id)}/checkpoints?limit=100&order=asc`),
      v1('GET', `/v1/preview/models/${modelPath(id)}/aliases`).then((r) => r.data, () => [])]);
    const aliasesOf = (step) => aliases.filter((a) => a.step === step).map((a) => h('span.badge.alias', { title: `${id}:${a.alias}` }, a.alias));
    for (const c of cpCharts) c.remove();
    cpCharts = [];
    if (!data.length) return emptyState(h('p', {}, 'No checkpoints yet: a job saves one when it succeeds.'));
    const metricNames = [...new Set(data.flatMap((c) => Object.keys(c.metrics || {})))].sort();
    // Checkpoint metrics (the jobs' and /log's, evaluations among them) over the steps; a
    // reward with its standard deviation (RL steps) as a spread around it.
    const groups = {};
    for (const c of data) for (const [k, v] of Object.entries(c.metrics || {})) if (typeof v === 'number') ((groups[groupOf(k)] ||= {})[k] ||= []).push([c.step, v]);
    for (const [g, s] of Object.entries(groups)) {
      const bands = [];
      if (s.reward && s.reward_std_dev) {
        const sd = new Map(s.reward_std_dev);
        s['reward + sd'] = s.reward.map(([x, y]) => [x, y + (sd.get(x) || 0)]);
        s['reward − sd'] = s.reward.map(([x, y]) => [x, y - (sd.get(x) || 0)]);
        delete s.reward_std_dev;
        bands.push(['reward + sd', 'reward − sd']);
      }
      const before = charts.children.length;
      lineChart(charts, 'checkpoint ' + g, ctl)(s, { bands });
      cpCharts.push(...[...charts.children].slice(before));
    }
    return h('div.tablewrap', {}, h('table.grid.checkpoints', {}, h('thead', {}, h('tr', {}, h('th', {}, 'Step'), h('th', {}, 'Aliases'), metricNames.map((k) => h('th', {}, k)), h('th', {}, 'Created'), h('th', {}, ''))),
      h('tbody', {}, data.map((c) => h('tr', { 'data-step': c.step }, h('td.num', {}, c.step), h('td.aliases', {}, aliasesOf(c.step)), metricNames.map((k) => h('td.num', {}, c.metrics && typeof c.metrics[k] === 'number' ? +c.metrics[k].toPrecision(5) : '')),
        h('td', {}, fmtTime(c.created_at)),
        h('td', {}, h('a', { href: `/playground?model=${enc(id + ':step' + c.step)}` }, 'chat'), ' ',
          h('button.link.danger', { type: 'button', onclick: async () => {
            if (!await confirmDialog(`Delete checkpoint step ${c.step} of ${id}? It can no longer be served or exported.`)) return;
            try {
              const r = await v1('DELETE', `/v1/preview/models/${modelPath(id)}/checkpoints`, { steps: [c.step] });
              if (r && r.not_found_steps && r.not_found_steps.length) toast(`Checkpoint step ${c.step} was already deleted (elsewhere); the list is read again.`, 'error');
              else toast(`Deleted checkpoint step ${c.step}.`);
              loadCps();
            } catch (e) { toast(e, 'error'); }
          } }, 'delete')))))));
  }, 'Loading checkpoints…');
  await loadCps();
  // Aliases, their history, the checkpoints' evaluations and the training policy (loop.js).
  loopSections(root, id, () => loadCps());

  // Every job's loss (or reward) overlaid, one curve per run.
  const jobs = (await allJobs(id)).filter((j) => j.status !== 'QUEUED').slice(0, 8);
  const steps = await Promise.all(jobs.map((j) => jobSteps(j.id)));
  const runs = {};
  jobs.forEach((j, i) => { if (steps[i].loss && steps[i].loss.length) runs[`${short(j.id)} loss`] = steps[i].loss; });
  if (Object.keys(runs).length) lineChart(charts, 'loss by run', ctl)(runs);
}
