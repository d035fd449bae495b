// The improvement loop on a model's page: its aliases (the checkpoint each serves, its
// promotion rule; promote one to a checkpoint or roll it back, with a reason), every alias's
// history (who moved it and why; a promotion's decision with both scores), the checkpoints'
// evaluation runs (each metric; the runs of one Evaluation compared on the Evaluations page),
// and its training policy (its state, pause or resume, run now) with its runs.
import { v1 } from './api.js';
import { h, enc, fmtTime, loading, emptyState, confirmDialog, toast, STALE } from './dom.js';
import { projectBase } from './app.js';

const num = (v) => (typeof v === 'number' ? String(+v.toPrecision(4)) : '—');
const stepName = (s) => (s === 0 ? 'base (step 0)' : `step ${s}`);
const KIND = { promoted: '.st-succeeded', rollback: '.st-running', deleted: '.st-failed' };

// newest wraps a section's load so that only the newest draws: a load begun before a change
// (an alias moved, the policy paused) that ends after the next one is dropped (STALE).
function newest() {
  let n = 0;
  return (fn) => { const my = ++n; return async () => { const r = await fn(); return my === n ? r : STALE; }; };
}

// loopSections adds the sections to root for model id (<entity>/<project>/<name>); changed is
// called when an alias moves (the checkpoints table shows them).
export function loopSections(root, id, changed) {
  const mp = id.split('/').map(enc).join('/');
  const base = `/v1/preview/models/${mp}`;
  const aliasesEl = h('div#aliases');
  const histEl = h('div#alias-history');
  const evalsEl = h('div#model-evals');
  const policyEl = h('div#policy');
  root.append(h('h2', {}, 'Aliases'), aliasesEl, h('h2', {}, 'Alias history'), histEl,
    h('h2', {}, 'Evaluations of its checkpoints'), evalsEl, h('h2', {}, 'Training policy'), policyEl);

  const moved = () => { loadAliases(true); loadHistory(true); loadPolicy(true); if (changed) changed(); };

  // The checkpoints an alias may name: the base and every step.
  async function steps() {
    const { data } = await v1('GET', `${base}/checkpoints?limit=100&order=asc`);
    return [0, ...data.map((c) => c.step)];
  }

  const loadAliasesGen = newest();
  const loadAliases = (quiet) => loading(aliasesEl, loadAliasesGen(async () => {
    const [{ data }, all] = await Promise.all([v1('GET', `${base}/aliases`), steps()]);
    const stepSelect = (idAttr, cur) => h('select', { id: idAttr, 'aria-label': 'Checkpoint' },
      all.map((s) => h('option', { value: s, selected: s === cur }, stepName(s))));
    const rows = data.map((a) => {
      const sel = stepSelect(`promote-step-${a.alias}`, a.step);
      const why = h('input', { id: `promote-reason-${a.alias}`, placeholder: 'why', 'aria-label': `Why ${a.alias} moves` });
      let rule = '—';
      if (a.rule) {
        const name = String(a.rule.evaluation || '').replace(/^.*\/object\//, '').replace(/:.*$/, '');
        rule = `${a.rule.metric} of ${name}, by more than ${a.rule.margin || 0}`;
      }
      return h('tr', { 'data-alias': a.alias, 'data-step': a.step },
        h('td', {}, h('code', {}, a.alias)),
        h('td', {}, h('a', { href: `/playground?model=${enc(a.name)}` }, stepName(a.step))),
        h('td.rule', {}, rule),
        h('td', {}, fmtTime(a.updated_at), h('div.muted', {}, a.updated_by)),
        h('td', {}, a.reason || ''),
        h('td.aliasactions', {}, sel, ' ', why, ' ',
          h('button', { type: 'button', id: `promote-${a.alias}`, onclick: async () => {
            const step = +sel.value;
            if (step === a.step) { toast(`${a.alias} already serves ${stepName(step)}.`, 'error'); return; }
            try {
              await v1('PUT', `${base}/aliases/${enc(a.alias)}`, { step, reason: why.value });
              toast(`${a.alias} now serves ${stepName(step)}.`);
              moved();
            } catch (e) { toast(e, 'error'); }
          } }, 'Promote'), ' ',
          h('button', { type: 'button', id: `rollback-${a.alias}`, onclick: async () => {
            if (!await confirmDialog(`Roll ${id}:${a.alias} back to the checkpoint it served before ${stepName(a.step)}?`, 'Roll back', false)) return;
            try {
              const v = await v1('POST', `${base}/aliases/${enc(a.alias)}/rollback`, { reason: why.value });
              toast(`${a.alias} rolled back to ${stepName(v.step)}.`);
              moved();
            } catch (e) { toast(e, 'error'); }
          } }, 'Roll back')));
    });
    const name = h('input#new-alias', { placeholder: 'prod', 'aria-label': 'New alias' });
    const sel = stepSelect('new-alias-step', all[all.length - 1]);
    const add = h('p.toolbar', {}, h('label', {}, 'New alias ', name), ' on ', sel, ' ',
      h('button#new-alias-set', { type: 'button', onclick: async () => {
        try {
          await v1('PUT', `${base}/aliases/${enc(name.value.trim())}`, { step: +sel.value, reason: 'created in Hone Studio' });
          toast(`${name.value.trim()} serves ${stepName(+sel.value)}.`);
          moved();
        } catch (e) { toast(e, 'error'); }
      } }, 'Set'));
    if (!data.length) return h('div', {}, emptyState(h('p', {}, 'No aliases yet: name a checkpoint (prod, staging) and chat with ', h('code', {}, id + ':prod'), '.')), add);
    return h('div', {}, h('div.tablewrap', {}, h('table.grid.aliases', {},
      h('thead', {}, h('tr', {}, ['Alias', 'Serves', 'Promotion rule', 'Updated', 'Why', 'Move'].map((c) => h('th', {}, c)))),
      h('tbody', {}, rows))), add);
  }), 'Loading aliases…', quiet);

  const loadHistoryGen = newest();
  const loadHistory = (quiet) => loading(histEl, loadHistoryGen(async () => {
    const { data } = await v1('GET', `${base}/alias-events?limit=50`);
    if (!data.length) return emptyState(h('p', {}, 'No alias has moved yet.'));
    return h('div.tablewrap', {}, h('table.grid.alias-history', {},
      h('thead', {}, h('tr', {}, ['When', 'Alias', 'Event', 'Checkpoints', 'Scores', 'By', 'Why'].map((c) => h('th', {}, c)))),
      h('tbody', {}, data.map((e) => {
        const d = e.data || {};
        const scores = (e.kind === 'promoted' || e.kind === 'kept') && d.metric
          ? `${d.metric}: step ${d.candidate_step} ${num(d.candidate_score)} vs step ${d.current_step} ${num(d.current_score)} (margin ${d.margin})` : '';
        const steps = e.from_step !== null && e.to_step !== null && e.from_step !== e.to_step ? `${e.from_step} → ${e.to_step}`
          : e.to_step !== null ? String(e.to_step) : e.from_step !== null ? String(e.from_step) : '';
        return h('tr', { 'data-kind': e.kind, 'data-alias': e.alias },
          h('td', {}, fmtTime(e.created_at)), h('td', {}, h('code', {}, e.alias)),
          h('td', {}, h('span.badge' + (KIND[e.kind] || ''), {}, e.kind)), h('td.num', {}, steps), h('td.scores', {}, scores),
          h('td', {}, d.job_id ? h('a', { href: `${projectBase()}/training/jobs/${enc(d.job_id)}` }, e.actor) : e.actor), h('td', {}, e.reason));
      }))));
  }), 'Loading the history…', quiet);

  const loadEvals = () => loading(evalsEl, async () => {
    const { data } = await v1('GET', `${base}/evaluations?limit=100`);
    if (!data.length) return emptyState(h('p', {}, 'No evaluation of its checkpoints yet: run one (', h('code', {}, 'hone eval --model ' + id + ':latest'),
      '), or name an evaluation in a training job, and each checkpoint gets its scores.'));
    const byEval = new Map();
    for (const r of data) (byEval.get(r.evaluation) || byEval.set(r.evaluation, []).get(r.evaluation)).push(r);
    return h('div', {}, [...byEval.entries()].map(([name, runs]) => {
      runs.sort((a, b) => (a.step ?? -1) - (b.step ?? -1) || a.created_at.localeCompare(b.created_at));
      const metrics = [...new Set(runs.flatMap((r) => Object.keys(r.metrics || {})))].sort();
      const proj = runs[0].project;
      const compare = runs.slice(-6).map((r) => r.call_id).join(',');
      return h('div.modeleval', { 'data-evaluation': name },
        h('h3', {}, name, ' ', runs.length > 1 ? h('a.compare', { href: `/${proj.split('/').map(enc).join('/')}/weave/evaluations?compare=${enc(compare)}` }, 'compare in Evaluations') : ''),
        h('div.tablewrap', {}, h('table.grid.model-evals', {},
          h('thead', {}, h('tr', {}, h('th', {}, 'Checkpoint'), h('th', {}, 'Run'), metrics.map((m) => h('th', {}, m)), h('th', {}, 'Finished'))),
          h('tbody', {}, runs.map((r) => h('tr', { 'data-step': r.step, 'data-label': r.label },
            h('td', {}, stepName(r.step)),
            h('td', {}, h('a', { href: `/${r.project.split('/').map(enc).join('/')}/weave/calls/${enc(r.call_id)}` }, r.label || 'evaluation')),
            metrics.map((m) => h('td.num', { 'data-metric': m }, num((r.metrics || {})[m]))),
            h('td', {}, fmtTime(r.finished_at))))))));
    }));
  }, 'Loading evaluations…');

  const loadPolicyGen = newest();
  const loadPolicy = (quiet) => loading(policyEl, loadPolicyGen(async () => {
    // The runs' list holds the policy too (null when there is none: no 404 to read).
    const { data: runs, policy: p } = await v1('GET', `${base}/policy/runs?limit=20`);
    if (!p) {
      return h('div', {}, emptyState(h('p', {}, 'No training policy: it is off until set. ', h('code', {}, `hone policy set --model ${id} --alias prod --every-calls 20`),
        ' trains again from the calls users liked, evaluates and promotes by the alias\'s rule.')), runs.length ? runsTable(runs) : '');
    }
    const triggers = [p.every_calls ? `every ${p.every_calls} liked calls` : '', p.interval ? `every ${p.interval}` : ''].filter(Boolean).join(' or ');
    const head = h('p.policyhead', {}, h('span.badge' + (p.paused ? '' : '.st-succeeded'), { id: 'policy-state' }, p.paused ? 'paused' : 'active'), ' ',
      `${p.kind.toUpperCase()} from `, h('code', {}, p.project), `, ${triggers}, trained from `, h('code', {}, p.alias), ` and promoted by its rule; `,
      h('span#policy-new', {}, `${p.new_calls} new call${p.new_calls === 1 ? '' : 's'} with feedback`), ' ',
      h('button#policy-toggle', { type: 'button', onclick: async () => {
        try { await v1('POST', `${base}/policy/${p.paused ? 'resume' : 'pause'}`); toast(p.paused ? 'The policy is active.' : 'The policy is paused.'); loadPolicy(true); } catch (e) { toast(e, 'error'); }
      } }, p.paused ? 'Resume' : 'Pause'), ' ',
      h('button#policy-run', { type: 'button', onclick: async () => {
        try { const j = await v1('POST', `${base}/policy/run`, { reason: 'started in Hone Studio' }); toast(`Run ${j.id.slice(-8)} queued.`); loadPolicy(true); } catch (e) { toast(e, 'error'); }
      } }, 'Run now'));
    if (!runs.length) return h('div', {}, head, emptyState(h('p', {}, 'No runs yet.')));
    return h('div', {}, head, runsTable(runs));
  }), 'Loading the policy…', quiet);

  const runsTable = (runs) => h('div.tablewrap', {}, h('table.grid.policy-runs', {},
      h('thead', {}, h('tr', {}, ['Run', 'Started', 'Trigger', 'Status', 'Rows', 'Checkpoints', 'Outcome'].map((c) => h('th', {}, c)))),
      h('tbody', {}, runs.map((r) => {
        const res = r.result || {};
        const outcome = res.decision ? res.decision.message : res.skipped ? 'nothing to train on: ' + res.skipped : r.error_message || '';
        return h('tr', { 'data-id': r.job_id, 'data-status': r.status },
          h('td', {}, h('a', { href: `${projectBase()}/training/jobs/${enc(r.job_id)}` }, r.job_id.slice(-8))),
          h('td', {}, fmtTime(r.created_at)), h('td', {}, r.trigger.reason, h('div.muted', {}, r.trigger.message || '')),
          h('td', {}, h('span.badge.st-' + String(r.status).toLowerCase(), {}, r.status)), h('td.num', {}, res.rows ?? ''),
          h('td.num', {}, res.step ? `${res.from_step} → ${res.step}` : ''),
          h('td', { class: res.decision ? (res.decision.promoted ? 'promoted' : 'kept') : '' }, outcome));
      }))));

  loadAliases();
  loadHistory();
  loadEvals();
  loadPolicy();
  return { reload: moved };
}
