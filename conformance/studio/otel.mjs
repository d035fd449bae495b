// Hone Studio shows calls that came in as OpenTelemetry spans (issue 37): cmd/hone
// TestStudioOTelCalls exports an agent turn with a chat completion under it through
// /otel/v1/traces (OTLP protobuf, OpenInference's attributes), then this script signs in,
// opens the turn by the Weave SDK's call URL, and checks the tree (the turn and its chat call,
// the rolled-up tokens) and the chat call's detail: its messages as a conversation, user and
// assistant. No console error, page error or failed request is allowed. The last line of
// stdout is {"ok": true, "checks": N}.
import puppeteer from 'puppeteer-core';
import { join } from 'node:path';

const base = process.env.HONE_URL;
const key = process.env.HONE_KEY;
const out = process.env.HONE_OUT;
const project = process.env.HONE_PROJECT;
const root = process.env.HONE_ROOT_CALL;
const chat = process.env.HONE_CHAT_CALL;
const question = process.env.HONE_QUESTION;
const browserPath = process.env.HONE_CHROMIUM || '/usr/bin/chromium';
let checks = 0;
function check(cond, msg) {
  if (!cond) throw new Error('check failed: ' + msg);
  checks++;
}

const browser = await puppeteer.launch({ executablePath: browserPath, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
const errors = [];
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 900 });
  page.on('pageerror', (e) => errors.push('page error: ' + e));
  page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
  page.on('requestfailed', (r) => { const f = r.failure(); if (!f || f.errorText !== 'net::ERR_ABORTED') errors.push(`request failed: ${r.url()}`); });
  page.on('response', (r) => { if (r.status() >= 400) errors.push(`response ${r.status()}: ${r.url()}`); });
  const text = (sel) => page.$eval(sel, (e) => e.textContent);

  await page.goto(base + '/', { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('form.signin #key');
  await page.type('#key', key);
  await page.click('form.signin button[type=submit]');
  await page.waitForSelector(`table.projects tr[data-project="${project}"]`);
  check(true, 'signed in; the OTel project is listed');

  await page.goto(`${base}/${project}/r/call/${root}`, { waitUntil: 'domcontentloaded' });
  await page.waitForSelector(`.tree .node[data-id="${chat}"]`);
  const ops = await page.$$eval('.tree .node .op', (els) => els.map((e) => e.textContent));
  check(ops.includes('agent-turn') && ops.includes('ChatCompletion'), 'the turn and its chat call in the tree: ' + ops);
  check(/\d/.test(await text('#usage')), 'the turn shows its rolled-up tokens: ' + await text('#usage'));
  await page.click(`.tree .node[data-id="${chat}"]`);
  await page.waitForSelector('.detail .chat .msg.user');
  await page.waitForSelector('.detail .chat .msg.assistant');
  const user = await page.$$eval('.detail .chat .msg.user .content', (els) => els.map((e) => e.textContent));
  check(user.some((u) => u.includes(question)), 'the user message as a conversation: ' + user);
  await page.screenshot({ path: join(out, 'otel-call.png') });
  check(errors.length === 0, 'no errors: ' + errors.join('; '));
  console.log(JSON.stringify({ ok: true, checks }));
} finally {
  await browser.close();
}
