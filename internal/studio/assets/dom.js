// DOM helpers: h() builds elements, jsonView() renders values as collapsible JSON, and the
// formatters the views share.

export function h(tag, props, ...children) {
  // tag is "name", "name.class1.class2", "name#id", or "name#id.class".
  const parts = tag.split(/(?=[.#])/);
  const el = document.createElement(parts[0].startsWith('.') || parts[0].startsWith('#') ? 'div' : parts.shift());
  const classes = [];
  for (const p of parts) p[0] === '#' ? (el.id = p.slice(1)) : classes.push(p.slice(1));
  if (classes.length) el.className = classes.join(' ');
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'class') el.className += (el.className ? ' ' : '') + v;
    else if (k === 'style' && typeof v === 'object') Object.assign(el.style, v);
    else if (k in el && k !== 'list') el[k] = v;
    else el.setAttribute(k, v === true ? '' : v);
  }
  add(el, children);
  return el;
}

function add(el, children) {
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    if (Array.isArray(c)) add(el, c);
    else el.append(c instanceof Node ? c : String(c));
  }
}

export function clear(el, ...children) { el.replaceChildren(); add(el, children); return el; }

// link is an in-app link: a plain <a href> that the router intercepts.
export const link = (href, ...children) => h('a', { href }, ...children);

// refHref maps a weave:/// ref to the UI page that shows it, or null.
export function refHref(ref) {
  const m = /^weave:\/\/\/([^/]+)\/([^/]+)\/(object|op|table|call)\/([^/:]+)(?::([^/]+))?/.exec(ref);
  if (!m) return null;
  const [, e, p, kind, name, digest] = m;
  const base = `/${enc(e)}/${enc(p)}/weave`;
  if (kind === 'call') return `${base}/calls/${enc(name)}`;
  if (kind === 'table') return `${base}/tables/${enc(name)}`;
  return `${base}/objects/${enc(name)}` + (digest ? `?v=${enc(digest)}` : '');
}
export const enc = encodeURIComponent;

// jsonView renders v as collapsible JSON (objects and arrays open to depth `open`).
export function jsonView(v, open = 2) {
  return h('div.json', {}, node(v, open, null));
}

function node(v, open, key) {
  const label = key === null ? null : h('span.k', {}, key + ': ');
  if (v === null || typeof v !== 'object') return h('div.jl', {}, label, scalar(v));
  const arr = Array.isArray(v);
  const entries = arr ? v.map((x, i) => [i, x]) : Object.entries(v);
  if (!entries.length) return h('div.jl', {}, label, h('span.p', {}, arr ? '[]' : '{}'));
  const d = h('details', { open: open > 0 });
  const summary = h('summary', {}, label, h('span.p', {}, arr ? `[${entries.length}]` : `{${entries.length}}`));
  d.append(summary);
  let filled = false;
  const fill = () => {
    if (filled) return;
    filled = true;
    const body = h('div.jb');
    for (const [k, x] of entries.slice(0, 500)) body.append(node(x, open - 1, k));
    if (entries.length > 500) body.append(h('div.muted', {}, `… ${entries.length - 500} more`));
    d.append(body);
  };
  if (open > 0) fill(); else d.addEventListener('toggle', fill, { once: true });
  return d;
}

function scalar(v) {
  if (typeof v === 'string') {
    const href = v.startsWith('weave:///') ? refHref(v) : null;
    if (href) return h('a.ref', { href }, v);
    return h('span.s', {}, JSON.stringify(v));
  }
  return h('span.' + (v === null ? 'n' : typeof v === 'number' ? 'num' : 'b'), {}, String(v));
}

export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}
export function fmtMs(ms) {
  if (ms === null || ms === undefined || isNaN(ms)) return '';
  return ms < 1000 ? `${Math.round(ms)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}
export const fmtNum = (n) => (n === null || n === undefined ? '' : Number(n).toLocaleString());
export function fmtCost(c) {
  if (!c) return '';
  return '$' + (c < 0.01 ? c.toPrecision(2) : c.toFixed(4));
}

// usageTotals sums a summary.usage / call_usage map: {model: {total_tokens, ...}}.
export function usageTotals(usage) {
  let tokens = 0, cost = 0, requests = 0;
  for (const u of Object.values(usage || {})) {
    if (!u) continue;
    tokens += u.total_tokens || (u.prompt_tokens || u.input_tokens || 0) + (u.completion_tokens || u.output_tokens || 0);
    requests += u.requests || 0;
    for (const k of ['prompt_tokens_total_cost', 'completion_tokens_total_cost', 'cache_read_input_tokens_total_cost', 'cache_creation_input_tokens_total_cost']) cost += u[k] || 0;
  }
  return { tokens, cost, requests };
}

export function errorBox(err) {
  return h('div.error', { role: 'alert' }, String(err && err.message ? err.message : err));
}

// loading replaces el's content with the result of fn (a promise of nodes), or its error.
export async function loading(el, fn) {
  clear(el, h('p.muted', {}, 'Loading…'));
  try { clear(el, await fn()); } catch (e) { clear(el, errorBox(e)); }
}
