// The public APIs the UI is a client of: /v1 with Bearer, the trace routes with HTTP Basic
// (the password is the API key). The key lives in sessionStorage for this tab only.

const KEY = 'hone.key';

export const session = {
  get key() { return sessionStorage.getItem(KEY) || ''; },
  set key(k) { k ? sessionStorage.setItem(KEY, k) : sessionStorage.removeItem(KEY); },
  entity: '',
};

export class APIError extends Error {
  constructor(status, message) { super(message); this.status = status; }
}

// check answers res when it is ok; otherwise it throws the API's message. A 401 tells the
// shell the key no longer works (signing in handles its own 401: quiet).
async function check(res, quiet) {
  if (res.ok) return res;
  let msg = res.status + ' ' + res.statusText;
  try { const j = await res.json(); msg = (j.error && j.error.message) || j.detail || JSON.stringify(j); } catch {}
  if (res.status === 401 && !quiet) window.dispatchEvent(new CustomEvent('hone:unauthorized'));
  throw new APIError(res.status, msg);
}

const bearer = () => ({ Authorization: 'Bearer ' + session.key });
const basic = () => ({ Authorization: 'Basic ' + btoa('api:' + session.key) });

// v1 calls a /v1 route with the key as Bearer.
export async function v1(method, path, body, signal) {
  const init = { method, headers: bearer(), signal };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  const res = await check(await fetch(path, init));
  return res.status === 204 ? null : res.json();
}

// tr calls a trace route (POST JSON, or GET without body) with the key as Basic.
export async function tr(path, body) {
  const init = body === undefined ? { headers: basic() }
    : { method: 'POST', headers: { ...basic(), 'Content-Type': 'application/json' }, body: JSON.stringify(body) };
  const res = await check(await fetch(path, init));
  return res.json();
}

// calls runs /calls/stream_query and parses its JSON lines as they arrive (a 10,000-call
// trace is parsed while the rest of it is still on its way); progress(rows so far) is called
// after each part read.
export async function calls(body, progress) {
  const res = await check(await fetch('/calls/stream_query', {
    method: 'POST', headers: { ...basic(), 'Content-Type': 'application/json', Accept: 'application/jsonl' }, body: JSON.stringify(body),
  }));
  const out = [];
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    buf += done ? dec.decode() : dec.decode(value, { stream: true });
    let start = 0;
    for (let i; (i = buf.indexOf('\n', start)) >= 0; start = i + 1) if (i > start) out.push(JSON.parse(buf.slice(start, i)));
    buf = buf.slice(start);
    if (done) break;
    if (progress && out.length) progress(out);
  }
  if (buf.trim()) out.push(JSON.parse(buf));
  return out;
}

// callsExport runs /calls/stream_query in the format accept asks (the server's export:
// application/jsonl, application/json, text/csv or text/tab-separated-values) and answers the
// file as a Blob.
export async function callsExport(body, accept) {
  const res = await check(await fetch('/calls/stream_query', {
    method: 'POST', headers: { ...basic(), 'Content-Type': 'application/json', Accept: accept }, body: JSON.stringify(body),
  }));
  return res.blob();
}

// whoami answers the key's entity (the W&B viewer query the SDKs ask at start).
// A refused key is thrown quietly when signing in (the form says so itself).
export async function whoami(signingIn = false) {
  const res = await check(await fetch('/graphql', {
    method: 'POST', headers: { ...bearer(), 'Content-Type': 'application/json' },
    body: JSON.stringify({ query: 'query { viewer { username defaultEntity { name } } }' }),
  }), signingIn);
  const j = await res.json();
  return j.data.viewer.defaultEntity.name;
}

// sse reads server-sent events from a /v1 route (fetch, so that the key goes as Bearer) and
// calls onEvent({id, event, data}) for each; it resolves when the stream ends. headers are
// added to the request's (X-Hone-Trace-Project).
export async function sse(path, body, onEvent, signal, headers = {}) {
  const init = { method: body === undefined ? 'GET' : 'POST', headers: { ...bearer(), Accept: 'text/event-stream', ...headers }, signal };
  if (body !== undefined) { init.headers['Content-Type'] = 'application/json'; init.body = JSON.stringify(body); }
  const res = await check(await fetch(path, init));
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '';
  let ev = { data: [] };
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, '');
      buf = buf.slice(i + 1);
      if (line === '') {
        if (ev.data.length) onEvent({ id: ev.id, event: ev.event || 'message', data: ev.data.join('\n') });
        ev = { data: [] };
      } else if (line.startsWith('data:')) ev.data.push(line.slice(5).replace(/^ /, ''));
      else if (line.startsWith('event:')) ev.event = line.slice(6).trim();
      else if (line.startsWith('id:')) ev.id = line.slice(3).trim();
    }
  }
}

// fileContent reads a file's bytes as text (/file/content: an op's source).
export async function fileContent(projectID, digest) {
  const res = await check(await fetch('/file/content', {
    method: 'POST', headers: { ...basic(), 'Content-Type': 'application/json' }, body: JSON.stringify({ project_id: projectID, digest }),
  }));
  return res.text();
}
