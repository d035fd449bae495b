// Drives Hone Studio in headless Debian chromium (puppeteer-core) against a server that
// cmd/hone TestStudioBrowser starts: sign in, open a trace by the Weave SDK's URL, expand the
// tree, add feedback, open a dataset and a diff, watch a running SFT job's curve update, chat
// in the playground with a streamed reply, measure a 10,000-call trace, and check that a key
// of another entity sees nothing of the first. Screenshots go to HONE_OUT. The last line of
// stdout is {"ok": true, "checks": N, "perf": {...}}.
import puppeteer from 'puppeteer-core';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const base = process.env.HONE_URL;
const key = process.env.HONE_KEY;
const key2 = process.env.HONE_KEY2;
const out = process.env.HONE_OUT;
const browserPath = process.env.HONE_CHROMIUM || '/usr/bin/chromium';
const P = 'local/studio';
let checks = 0;
const perf = {};
function check(cond, msg) {
  if (!cond) throw new Error('check failed: ' + msg);
  checks++;
}

async function api(path, body, { bearer = false, k = key, method } = {}) {
  const headers = { Authorization: bearer ? `Bearer ${k}` : 'Basic ' + Buffer.from('api:' + k).toString('base64') };
  let payload;
  if (body !== undefined) {
    if (typeof body === 'string') payload = body;
    else { headers['Content-Type'] = 'application/json'; payload = JSON.stringify(body); }
  }
  const res = await fetch(base + path, { method: method || (body === undefined ? 'GET' : 'POST'), headers, body: payload });
  const text = await res.text();
  if (!res.ok) throw new Error(`${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

const iso = (ms) => new Date(ms).toISOString();
function call(id, trace, parent, op, start, ms, extra = {}) {
  const s = { project_id: P, id, trace_id: trace, parent_id: parent, op_name: op, started_at: iso(start), attributes: {}, inputs: extra.inputs || {} };
  const e = { project_id: P, id, ended_at: iso(start + ms), output: extra.output ?? null, summary: extra.summary || {}, exception: extra.exception };
  return [{ mode: 'start', req: { start: s } }, { mode: 'end', req: { end: e } }];
}
const uuid = () => crypto.randomUUID();

async function seed() {
  const t0 = Date.now() - 60000;
  const trace = uuid();
  const root = uuid(), chat = uuid(), tool = uuid(), db = uuid();
  const usage = { 'demo': { requests: 1, prompt_tokens: 21, completion_tokens: 7, total_tokens: 28 } };
  const batch = [
    ...call(root, trace, null, 'agent.run', t0, 1500, { inputs: { question: 'What is the capital of France?' }, output: 'Paris' }),
    ...call(chat, trace, root, 'openai.chat.completions.create', t0 + 10, 600, {
      inputs: { model: 'demo', messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'What is the capital of France?' }] },
      output: { id: 'c1', object: 'chat.completion', model: 'demo', choices: [{ index: 0, finish_reason: 'stop', message: { role: 'assistant', content: 'Paris.', reasoning: 'The user asks for a capital.' } }], usage: { prompt_tokens: 21, completion_tokens: 7, total_tokens: 28 } },
      summary: { usage } }),
    ...call(tool, trace, root, 'tool.search', t0 + 700, 500, { inputs: { q: 'France capital' }, output: { hits: 1 } }),
    ...call(db, trace, tool, 'db.lookup', t0 + 720, 100, { inputs: { table: 'cities' }, exception: 'KeyError: cities table is not loaded\n  at lookup (db.py:12)' }),
  ];
  await api('/call/upsert_batch', { batch });
  // More root calls, so that the table pages and sorts.
  const more = [];
  for (let i = 0; i < 60; i++) more.push(...call(uuid(), uuid(), null, i % 2 ? 'score.answer' : 'agent.run', t0 - i * 1000, 50 + i * 7, { inputs: { i }, output: i }));
  await api('/call/upsert_batch', { batch: more });

  // A dataset (a table and a Dataset object), and an object with two versions.
  const rows = [{ question: 'capital of France?', answer: 'Paris', difficulty: 2 }, { question: '2+2?', answer: '4', difficulty: 1 }, { question: 'largest planet?', answer: 'Jupiter', difficulty: 3 }];
  const table = await api('/table/create', { table: { project_id: P, rows } });
  const questions = await api('/obj/create', { obj: { project_id: P, object_id: 'questions', val: { _type: 'Dataset', name: 'questions', description: 'three questions', rows: `weave:///${P}/table/${table.digest}`, _class_name: 'Dataset', _bases: ['Object', 'BaseModel'] } } });
  await api('/obj/create', { obj: { project_id: P, object_id: 'prompt', val: { system: 'You are terse.', temperature: 0.2, stop: ['\n'] } } });
  await api('/obj/create', { obj: { project_id: P, object_id: 'prompt', val: { system: 'You are terse and kind.', temperature: 0.7, max_tokens: 64 } } });

  // Two evaluation runs (as the SDKs record Evaluation.evaluate), to compare, each with a
  // predict_and_score call per question as the Python SDK records them (the example a
  // reference to its row): run 0 gets the planet wrong, run 1 the sum.
  const ev = [];
  for (const [i, frac] of [[0, 0.5], [1, 0.75]]) {
    const run = uuid(), trace = uuid();
    ev.push(...call(run, trace, null, `weave:///${P}/op/Evaluation.evaluate:digest${i}`, t0 + 2000 + i * 1000, 800,
      { inputs: { self: `weave:///${P}/object/eval:d`, model: `weave:///${P}/object/model-${i}:d` }, output: { exact: { correct: { true_count: frac * 4, true_fraction: frac } }, model_latency: { mean: 0.1 + i / 10 } } }));
    rows.forEach((r, k) => {
      const correct = i === 0 ? k !== 2 : k !== 1;
      ev.push(...call(uuid(), trace, run, `weave:///${P}/op/Evaluation.predict_and_score:pas`, t0 + 2010 + i * 1000 + k * 100, 50, {
        inputs: { self: `weave:///${P}/object/eval:d`, model: `weave:///${P}/object/model-${i}:d`, example: `weave:///${P}/object/questions:${questions.digest}/attr/rows/id/${table.row_digests[k]}` },
        output: { output: correct ? r.answer : 'no idea', scores: { exact: { correct } }, model_latency: 0.05 } }));
    });
  }
  await api('/call/upsert_batch', { batch: ev });

  // A 10,000-call trace: a root with 100 children of 99 children each.
  const big = uuid(), bigRoot = uuid();
  let b = call(bigRoot, big, null, 'big.pipeline', t0, 9000);
  let n = 1;
  for (let i = 0; i < 100 && n < 10000; i++) {
    const c = uuid();
    b.push(...call(c, big, bigRoot, 'big.stage', t0 + i * 80, 70, { inputs: { stage: i } }));
    n++;
    for (let j = 0; j < 99 && n < 10000; j++, n++) b.push(...call(uuid(), big, c, 'big.step', t0 + i * 80 + j, 1, { inputs: { stage: i, step: j }, output: j }));
    if (b.length >= 2000) { await api('/call/upsert_batch', { batch: b }); b = []; }
  }
  if (b.length) await api('/call/upsert_batch', { batch: b });

  // 100,000 root calls in a project of their own, for the calls table's paging.
  for (let k = 0; k < 100; k++) {
    const batch = [];
    for (let i = 0; i < 1000; i++) {
      const items = call(uuid(), uuid(), null, i % 3 ? 'agent.run' : 'agent.plan', t0 - (k * 1000 + i) * 10, 5 + (i % 97), { inputs: { n: k * 1000 + i }, output: i });
      for (const it of items) (it.req.start || it.req.end).project_id = P + '-100k';
      batch.push(...items);
    }
    await api('/call/upsert_batch', { batch });
  }
  return { trace, root, chat, tool, db, bigRoot };
}

async function startSFT() {
  const lines = [];
  for (let i = 0; i < 40; i++) lines.push(JSON.stringify({ messages: [{ role: 'user', content: `say ${i}` }, { role: 'assistant', content: `ok ${i}` }] }));
  const f = await api('/v1/preview/files', lines.join('\n') + '\n', { bearer: true });
  const m = await api('/v1/preview/models', { project: 'studio', name: 'agent', base_model: 'demo', return_existing: true }, { bearer: true });
  const j = await api('/v1/preview/sft-training-jobs', { model_id: m.id, training_data_url: f.url, config: { learning_rate: 0.01, epochs: 30, batch_size: 1 } }, { bearer: true });
  // A job that fails: its data has a line that is not JSON.
  const bad = await api('/v1/preview/files', lines[0] + '\n{"messages": [}\n', { bearer: true });
  const jb = await api('/v1/preview/sft-training-jobs', { model_id: m.id, training_data_url: bad.url }, { bearer: true });
  return { model: m, job: j.id, badJob: jb.id };
}

const seeded = await seed();
const browser = await puppeteer.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
const shots = [];
let page;
const errors = [];
try {
  page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 900 });
  page.on('pageerror', (e) => errors.push(String(e)));
  page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
  const shot = async (name) => { const p = join(out, name + '.png'); await page.screenshot({ path: p }); shots.push(p); };
  const text = (sel) => page.$eval(sel, (e) => e.textContent);

  // Sign in.
  await page.goto(base + '/', { waitUntil: 'networkidle0' });
  await page.waitForSelector('form.signin #key');
  await shot('01-signin');
  await page.type('#key', key);
  await page.click('form.signin button[type=submit]');
  await page.waitForFunction(() => document.querySelector('main h1') && document.querySelector('main h1').textContent.includes('Projects of local'));
  check((await page.$$eval('ul.projects a', (as) => as.map((a) => a.textContent))).includes(P), 'project list has local/studio');
  check(await page.evaluate(() => sessionStorage.getItem('hone.key')) === key, 'key in sessionStorage');

  // The Weave SDK's project URL: the calls table.
  await page.goto(`${base}/${P}/weave`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.calls tbody tr');
  check(/64 calls/.test(await text('#calls-count')), 'roots counted: ' + await text('#calls-count'));
  check((await page.$$('table.calls tbody tr')).length === 50, 'a page of 50');
  await shot('02-calls');
  // Filter by status and op, sort by latency.
  await page.select('select[name=status]', 'success');
  await page.type('input[name=op]', 'score');
  await page.click('form.filters button[type=submit]');
  await page.waitForFunction(() => /30 calls/.test(document.querySelector('#calls-count')?.textContent || ''));
  check(page.url().includes('op=score') && page.url().includes('status=success'), 'filters in the URL: ' + page.url());
  // The calls query language, from the URL: roots slower than a second.
  await page.goto(`${base}/${P}/weave?q=` + encodeURIComponent('{"$expr": {"$gt": [{"$getField": "summary.weave.latency_ms"}, {"$literal": 1000}]}}'), { waitUntil: 'networkidle0' });
  await page.waitForSelector('#calls-count');
  check(/^2 calls/.test(await text('#calls-count')), 'query language: ' + await text('#calls-count'));
  await page.goto(`${base}/${P}/weave?op=score&status=success`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.calls tbody tr');
  await page.click('th[aria-sort]:nth-child(4)');
  await page.waitForFunction(() => location.search.includes('sort=summary.weave.latency_ms'));
  await page.waitForSelector('table.calls tbody tr');
  check(!!(await page.$('th.sorted')), 'sorted column');

  // The Weave SDK's call URL: the trace tree.
  await page.goto(`${base}/${P}/r/call/${seeded.root}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('.tree .node');
  const nodes = () => page.$$eval('.tree .node .op', (els) => els.map((e) => e.textContent));
  let visible = await nodes();
  check(visible.includes('agent.run') && visible.includes('tool.search') && !visible.includes('db.lookup'), 'root open, tool.search closed: ' + visible);
  await page.click(`.node[data-id="${seeded.tool}"] button.tog`);
  await page.waitForSelector(`.node[data-id="${seeded.db}"]`);
  check(!!(await page.$(`.node.exc[data-id="${seeded.db}"]`)), 'failed call highlighted in the tree');
  check(/28/.test(await text('#usage')), 'usage rolled up on the root: ' + await text('#usage'));
  await page.click(`.node[data-id="${seeded.db}"]`);
  await page.waitForSelector('.detail .exception');
  check((await text('.detail .exception')).includes('KeyError'), 'exception shown');
  check(page.url().endsWith('/weave/calls/' + seeded.db), 'selected call in the URL');
  await page.click(`.node[data-id="${seeded.chat}"]`);
  await page.waitForFunction(() => document.querySelector('.detail .msg.assistant')?.textContent.includes('Paris.'));
  check((await page.$$('.detail .msg')).length >= 3, 'conversation rendered');
  check((await text('.detail .msg.assistant details.reasoning')).includes('The user asks for a capital.'), 'the reply\'s reasoning shown');
  // Feedback: a reaction and a note, read back.
  await page.waitForSelector('.feedback button.react');
  await page.click('.feedback button.react');
  await page.waitForSelector('.fblist .emoji');
  await page.type('.feedback input[name=note]', 'good answer');
  await page.click('.feedback form.inline button');
  await page.waitForFunction(() => document.querySelector('.fblist .note')?.textContent === 'good answer');
  const fb = await api('/feedback/query', { project_id: P, query: { $expr: { $eq: [{ $getField: 'weave_ref' }, { $literal: `weave:///${P}/call/${seeded.chat}` }] } } });
  check(fb.result.length === 2 && fb.result.some((f) => f.payload.emoji === '👍'), 'feedback stored through the API');
  await shot('03-trace');
  await page.goto(`${base}/${P}/weave?all=1&op=openai`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.calls tbody tr');
  check((await text('table.calls tbody tr td:nth-child(7)')).includes('👍'), 'feedback column: ' + await text('table.calls tbody tr td:nth-child(7)'));

  // The trace the Weave TypeScript SDK wrote (cmd/hone runs conformance/weave-ts first), by
  // the URL the SDK prints; its usage rolled up; its evaluation with the scorer's summary.
  const SP = process.env.HONE_SDK_PROJECT;
  if (SP) {
    await page.goto(`${base}/${SP}/r/call/${process.env.HONE_SDK_ROOT}`, { waitUntil: 'networkidle0' });
    await page.waitForSelector('.tree .node');
    visible = await nodes();
    check(visible.includes('root') && visible.includes('step') && visible.filter((x) => x === 'llm').length === 1, 'SDK trace: root open, step closed: ' + visible);
    await page.click('.node[aria-expanded=false] button.tog');
    await page.waitForFunction(() => [...document.querySelectorAll('.tree .node .op')].filter((e) => e.textContent === 'llm').length === 3);
    check(/143 with descendants/.test(await text('#usage')), 'SDK usage rolled up without double counting: ' + await text('#usage'));
    await shot('03b-sdk-trace');
    await page.goto(`${base}/${SP}/weave/evaluations`, { waitUntil: 'networkidle0' });
    await page.waitForSelector('td.scores .score');
    check((await text('td.scores')).includes('exact.correct'), 'SDK evaluation with its scorer summary: ' + await text('td.scores'));
  }
  await page.goto(`${base}/${P}/weave/evaluations`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.grid tbody tr');
  for (const box of await page.$$('table.grid tbody input[type=checkbox]')) await box.click();
  await page.click('button.primary');
  await page.waitForSelector('table.compare');
  const cmp = await page.$$eval('table.compare tbody tr', (trs) => trs.map((t) => [...t.cells].map((c) => c.textContent)));
  check(cmp.some((r) => r[0] === 'exact.correct.true_fraction' && r[3] !== ''), 'two runs side by side: ' + JSON.stringify(cmp));
  check(page.url().includes('compare='), 'comparison in the URL');
  // By example: the rows read through their references, each run's output and score (run 1,
  // the newer, on the left).
  await page.waitForSelector('table.examples tbody tr');
  const exRows = await page.$$eval('table.examples tbody tr', (trs) => trs.map((t) => ({ cls: t.className, cells: [...t.cells].map((c) => c.textContent), up: !!t.querySelector('td.up'), down: !!t.querySelector('td.down') })));
  const exRow = (q) => exRows.find((r) => r.cells[0].includes(q)) || { cells: [] };
  check(exRows.length === 3 && exRows.filter((r) => r.cls === 'differs').length === 2 && /3 examples, 2 differ/.test(await text('#examples-count')), 'by example: ' + JSON.stringify(exRows));
  check(exRow('largest planet?').cells.slice(1).join('|') === 'Jupiter|no idea|true → false' && exRow('largest planet?').down, 'the planet, right then wrong: ' + JSON.stringify(exRow('largest planet?')));
  check(exRow('2+2?').cells.slice(1).join('|') === 'no idea|4|false → true' && exRow('2+2?').up, 'the sum, wrong then right: ' + JSON.stringify(exRow('2+2?')));
  await page.click('input[name=only-differing]');
  check(await page.$$eval('table.examples tbody tr', (trs) => trs.filter((t) => t.offsetParent !== null).length) === 2, 'only the examples that differ');
  await shot('03c-evaluations');

  // Keyboard: j j Enter opens the second call of the table, g e goes to the evaluations, /
  // focuses the filter.
  await page.goto(`${base}/${P}/weave`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.calls tbody tr.row');
  await page.focus('table.calls');
  await page.keyboard.press('j');
  await page.keyboard.press('j');
  check(await page.$$eval('table.calls tr.row.sel', (rs) => rs.length) === 1, 'j moves the selection');
  const second = await page.$$eval('table.calls tr.row', (rs) => rs[1].dataset.href);
  await page.keyboard.press('Enter');
  await page.waitForFunction((h) => location.pathname === h, {}, second);
  await page.keyboard.press('g'); // at once, while the call page may still be loading
  await page.keyboard.press('e');
  await page.waitForFunction(() => location.pathname.endsWith('/weave/evaluations'));
  await page.goto(`${base}/${P}/weave`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('[data-filter]');
  await page.keyboard.press('/');
  check(await page.evaluate(() => !!document.activeElement && document.activeElement.hasAttribute('data-filter')), '/ focuses the filter');
  // Time filters through the form: from a future time nothing, up to it everything.
  for (const [name, none] of [['from', true], ['to', false]]) {
    await page.goto(`${base}/${P}/weave?all=1`, { waitUntil: 'networkidle0' });
    await page.waitForSelector('#calls-count');
    const all = await text('#calls-count');
    await page.$eval(`input[name=${name}]`, (e) => { e.value = '2099-01-01T00:00'; });
    await page.$eval('form.filters', (f) => f.requestSubmit());
    await page.waitForFunction((n) => location.search.includes(n + '=2099'), {}, name);
    await page.waitForFunction((none, all) => {
      const c = document.querySelector('#calls-count');
      return c && (none ? c.textContent.startsWith('0 calls') : c.textContent === all);
    }, { timeout: 60000 }, none, all);
  }

  // A dataset's rows, sorted; an object's diff.
  await page.goto(`${base}/${P}/weave/objects`, { waitUntil: 'networkidle0' });
  await page.click('a[href$="/weave/objects/questions"]');
  await page.waitForSelector('table.rows tbody tr');
  check(/3 rows/.test(await text('#rows-count')), 'dataset rows counted');
  await page.evaluate(() => [...document.querySelectorAll('table.rows th')].find((t) => t.textContent.startsWith('difficulty')).click());
  await page.waitForFunction(() => document.querySelector('table.rows tbody tr td:nth-child(2)')?.textContent === '2+2?');
  check(true, 'rows sorted by difficulty');
  await shot('04-dataset');
  await page.goto(`${base}/${P}/weave/objects/prompt`, { waitUntil: 'networkidle0' });
  await page.click('a[href*="diff="]');
  await page.waitForSelector('table.diff');
  const diff = await page.$$eval('table.diff tbody tr', (trs) => trs.map((t) => t.className + ':' + t.cells[0].textContent));
  check(diff.includes('changed:system') && diff.includes('added:max_tokens') && diff.includes('removed:stop.0'), 'diff: ' + diff);
  await shot('05-diff');

  // A running SFT job: its loss curve grows while we watch.
  const { job, badJob } = await startSFT();
  await page.goto(`${base}/${P}/training/jobs/${job}`, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('.chart[data-chart=loss]', { timeout: 120000 });
  const first = +(await page.$eval('.chart[data-chart=loss]', (e) => e.dataset.points));
  await page.waitForFunction((n) => +document.querySelector('.chart[data-chart=loss]').dataset.points > n, { timeout: 120000 }, first);
  const status1 = await page.$eval('[data-status]', (e) => e.dataset.status);
  check(status1 === 'RUNNING' || status1 === 'SUCCEEDED', 'job status ' + status1);
  await shot('06-job-running');
  await page.waitForSelector('[data-status=SUCCEEDED]', { timeout: 240000 });
  const pts = +(await page.$eval('.chart[data-chart=loss]', (e) => e.dataset.points));
  check(pts > first, `curve updated live (${first} → ${pts} points)`);
  check(!!(await page.$('.chart[data-chart=grad_norm]')) && !!(await page.$('.chart[data-chart=learning_rate]')), 'grad norm and learning rate charts');
  await shot('07-job-done');
  // The model's page: checkpoints with metrics, deletion; the failed job's message in full.
  await page.goto(`${base}/${P}/training/jobs/${badJob}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('#job-error', { timeout: 120000 });
  check(/line 2/.test(await text('#job-error')), 'failure message shown: ' + await text('#job-error'));
  await page.goto(`${base}/${P}/training/models/agent`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.checkpoints tr[data-step="1"]');
  check((await text('table.checkpoints')).includes('loss'), 'checkpoint metrics');
  check(!!(await page.$('.chart[data-chart="loss by run"]')), 'runs overlaid');
  await shot('07b-model');
  // A streamed reply from the checkpoint, before it is deleted (min_tokens: a checkpoint
  // trained on "ok N" may well answer with its end token at once).
  await page.goto(`${base}/playground?model=${encodeURIComponent('local/studio/agent:step1')}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('#pg-input');
  await page.type('input[name=min_tokens]', '6');
  await page.type('#pg-input', 'Hello checkpoint');
  await page.click('#pg-send');
  await page.waitForSelector('#pg-done', { timeout: 60000 });
  check(await page.$eval('#pg-chat .msg.assistant', (m) => [...m.children].filter((c) => !c.classList.contains('role')).map((c) => c.textContent).join('').length > 0), 'a streamed reply from the checkpoint (text or reasoning)');
  check((await text('#pg-curl')).includes('"model": "local/studio/agent:step1"') && (await text('#pg-curl')).includes('"min_tokens": 6'), 'the checkpoint and min_tokens in the code');
  await page.goto(`${base}/${P}/training/models/agent`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.checkpoints tr[data-step="1"]');
  page.once('dialog', (d) => d.accept());
  await page.click('table.checkpoints tr[data-step="1"] button.danger');
  await page.waitForFunction(() => !document.querySelector('table.checkpoints tr[data-step="1"]'));
  const cps = await api(`/v1/preview/models/local/studio/agent/checkpoints`, undefined, { bearer: true });
  check(cps.data.length === 0, 'checkpoint deleted through the API');
  await page.goto(`${base}/${P}/training/jobs/${job}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('a[href^="/playground?model="]');
  await page.click('a[href^="/playground?model="]');

  // Playground (followed from the job, whose checkpoint is deleted by now): a reply streamed
  // from the demo base model, seen arriving in pieces.
  await page.waitForSelector('#pg-input');
  check((await page.$eval('#pg-model', (s) => s.value)) === 'local/studio/agent:step1', 'chat with this checkpoint');
  await page.select('#pg-model', 'demo');
  await page.type('input[name=seed]', '7');
  await page.type('#pg-input', 'Hello there');
  await page.evaluate(() => {
    window.__lens = new Set();
    new MutationObserver(() => { const m = document.querySelector('#pg-chat .msg.assistant .content'); if (m) window.__lens.add(m.textContent.length); })
      .observe(document.querySelector('#pg-chat'), { childList: true, subtree: true, characterData: true });
  });
  await page.click('#pg-send');
  await page.waitForSelector('#pg-done', { timeout: 60000 });
  const lens = await page.evaluate(() => [...window.__lens]);
  check(lens.length >= 2, 'reply arrived in pieces: ' + lens);
  check((await text('#pg-chat .msg.assistant .content')).length > 0, 'reply shown');
  check((await text('#pg-curl')).includes('/v1/chat/completions') && (await text('#pg-python')).includes('from openai import OpenAI'), 'curl and python');
  await page.select('select[aria-label="Response format"]', 'json_object');
  check((await text('#pg-curl')).includes('"json_object"') && (await text('#pg-python')).includes('response_format={"type": "json_object"}'), 'response_format in the code');
  await shot('08-playground');
  // A required tool call, streamed into the conversation.
  await page.select('select[aria-label="Response format"]', 'text');
  await page.$eval('textarea[aria-label=Tools]', (e) => { e.value = JSON.stringify([{ type: 'function', function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string', enum: ['Paris', 'Rome'] } }, required: ['city'] } } }]); });
  await page.select('select[aria-label="Tool choice"]', 'required');
  await page.$eval('input[name=max_tokens]', (e) => { e.value = '300'; });
  await page.type('#pg-input', 'Weather in Paris?');
  check((await text('#pg-curl')).includes('"tool_choice": "required"'), 'tool_choice in the code');
  await page.click('#pg-send');
  await page.waitForFunction(() => document.querySelector('#pg-done') && document.querySelectorAll('#pg-chat .msg.assistant').length === 2, { timeout: 60000 });
  check(/get_weather\(\{.*"city".*(Paris|Rome)/.test(await page.$$eval('#pg-chat .msg.assistant .toolcall', (els) => els.map((e) => e.textContent).join(' '))), 'the tool call shown in the conversation');
  await shot('08b-playground-tool-call');

  // A 10,000-call trace: time to an interactive tree, in the browser.
  for (const [name, url, sel] of [['trace_10000_calls', `${base}/${P}/weave/calls/${seeded.bigRoot}`, '.tree .node'], ['calls_table', `${base}/${P}/weave?all=1`, 'table.calls tbody tr'],
    ['evaluations', `${base}/${P}/weave/evaluations`, 'td.scores'], ['objects', `${base}/${P}/weave/objects`, 'table.grid tbody tr'],
    ['training', `${base}/${P}/training`, 'table.grid tbody tr'], ['job_first_curve', `${base}/${P}/training/jobs/${job}`, '.chart[data-chart=loss] canvas'],
    ['job_all_events', `${base}/${P}/training/jobs/${job}`, '.chart[data-chart=loss][data-points="1200"]']]) {
    const t = [];
    for (let i = 0; i < 3; i++) {
      await page.goto(base + '/playground', { waitUntil: 'networkidle0' });
      const t0 = Date.now();
      await page.goto(url, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector(sel, { timeout: 60000 });
      t.push(Date.now() - t0);
    }
    perf[name + '_ms'] = t.sort((a, b) => a - b)[1];
  }
  await page.goto(`${base}/${P}/weave?all=1`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('#calls-count');
  check((await page.$eval('#calls-count', (e) => e.textContent)).includes('10,072'), 'all calls counted (with the evaluations\' 6 predict_and_score calls)');
  // 100,000 calls: the first page, sorted by latency, and the last page.
  for (const [name, q] of [['calls_table_100k', ''], ['calls_table_100k_by_latency', '?sort=summary.weave.latency_ms'], ['calls_table_100k_last_page', '?page=1999']]) {
    const t = [];
    for (let i = 0; i < 3; i++) {
      await page.goto(base + '/playground', { waitUntil: 'networkidle0' });
      const t0 = Date.now();
      await page.goto(`${base}/${P}-100k/weave${q}`, { waitUntil: 'domcontentloaded' });
      await page.waitForSelector('table.calls tbody tr', { timeout: 60000 });
      t.push(Date.now() - t0);
    }
    perf[name + '_ms'] = t.sort((a, b) => a - b)[1];
  }
  check((await page.$eval('#calls-count', (e) => e.textContent)).includes('100,000 calls'), '100,000 calls counted');
  check((await page.$$('table.calls tbody tr')).length === 50, 'the last page is full');
  await page.goto(`${base}/${P}/weave/calls/${seeded.bigRoot}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('.tree .node');
  await page.click('.traceinfo button'); // expand all
  const rendered = await page.$$eval('.tree .node', (n) => n.length);
  check(rendered < 200, 'virtualised tree renders ' + rendered + ' rows of 10,000');
  const t1 = Date.now();
  await page.evaluate(() => { const t = document.querySelector('.tree'); t.scrollTop = t.scrollHeight / 2; });
  await page.waitForFunction(() => [...document.querySelectorAll('.tree .node .op')].some((e) => e.textContent === 'big.step'));
  perf.tree_scroll_ms = Date.now() - t1;
  await shot('09-big-trace');
  // A call renamed on its page; two calls picked in the table and deleted together.
  await page.goto(`${base}/${P}/weave/calls/${seeded.root}`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('#rename');
  page.once('dialog', (d) => d.accept('renamed run'));
  await page.click('#rename');
  await page.waitForFunction(() => document.querySelector('.detail h2 .name')?.textContent === 'renamed run');
  const renamed = await api('/call/read', { project_id: P, id: seeded.root });
  check(renamed.call.display_name === 'renamed run', 'renamed through the API: ' + renamed.call.display_name);
  await page.goto(`${base}/${P}/weave?op=score.answer`, { waitUntil: 'networkidle0' });
  await page.waitForSelector('table.calls input.pick');
  const before = parseInt((await text('#calls-count')).replace(/,/g, ''), 10);
  const pickedIDs = await page.$$eval('table.calls input.pick', (bs) => bs.slice(0, 2).map((b) => b.dataset.id));
  for (const b of (await page.$$('table.calls input.pick')).slice(0, 2)) await b.click();
  check((await text('#delete-selected')) === 'Delete 2 selected', 'two calls picked');
  page.once('dialog', (d) => d.accept());
  await page.click('#delete-selected');
  await page.waitForFunction((n) => document.querySelector('#calls-count')?.textContent === `${n} calls`, { timeout: 30000 }, before - 2);
  const gone = await api('/calls/stream_query', { project_id: P, filter: { call_ids: pickedIDs } });
  check(!gone || (typeof gone === 'string' ? gone.trim() === '' : (gone.length ?? 0) === 0), 'the picked calls are deleted: ' + JSON.stringify(gone));
  // Dark theme.
  await page.keyboard.press('Escape');
  await page.click('button[aria-label="Toggle theme"]');
  await shot('10-theme-toggled');
  check(errors.length === 0, 'no page errors: ' + errors.join('; '));

  // Another entity's key sees nothing of the first.
  const ctx2 = await browser.createBrowserContext();
  const p2 = await ctx2.newPage();
  await p2.setViewport({ width: 1280, height: 800 });
  await p2.goto(base + '/', { waitUntil: 'networkidle0' });
  await p2.type('#key', key2);
  await p2.click('form.signin button[type=submit]');
  await p2.waitForFunction(() => document.querySelector('main h1')?.textContent.includes('Projects of other'));
  check(!(await p2.content()).includes(P), 'the other entity lists none of local\'s projects');
  await p2.goto(`${base}/${P}/r/call/${seeded.root}`, { waitUntil: 'networkidle0' });
  await p2.waitForSelector('main .error');
  check(!(await p2.$('.tree')) && !(await p2.content()).includes('agent.run'), 'no trace shown to the other entity');
  const status = await p2.evaluate(async (P, root) => (await fetch('/call/read', { method: 'POST', headers: { Authorization: 'Basic ' + btoa('api:' + sessionStorage.getItem('hone.key')), 'Content-Type': 'application/json' }, body: JSON.stringify({ project_id: P, id: root }) })).status, P, seeded.root);
  check(status === 403, 'the API refuses the other entity: ' + status);
  await p2.screenshot({ path: join(out, '11-other-entity.png') });
  shots.push(join(out, '11-other-entity.png'));
} catch (e) {
  // What the page showed when a check failed, for the Go test's log.
  if (page) {
    await page.screenshot({ path: join(out, 'failure.png') }).catch(() => {});
    console.error('page at failure: ' + page.url() + '\n' + (await page.evaluate(() => document.body.innerText).catch(() => '')).slice(0, 3000));
  }
  console.error('page errors: ' + errors.join('\n'));
  throw e;
} finally {
  await browser.close();
}
writeFileSync(join(out, 'perf.json'), JSON.stringify(perf, null, 2));
console.log(JSON.stringify({ ok: true, checks, perf, screenshots: shots }));
