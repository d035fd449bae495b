// DOM helpers: h() builds elements, jsonView() renders values as collapsible JSON, markdown()
// renders message text, and the formatters, states (loading, empty, error) and small widgets
// (copy buttons, toasts) the views share.

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
  return `${base}/objects/${enc(name)}` + (digest && digest !== '*' ? `?v=${enc(digest)}` : '');
}
export const enc = encodeURIComponent;

// plural is "1 call", "2 calls" (n formatted with its thousands separators).
export const plural = (n, one, many = one + 's') => `${fmtNum(n)} ${n === 1 ? one : many}`;

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

// markdown renders text as Markdown (headings, paragraphs, lists, quotes, fenced and inline
// code, bold, italics, http(s) links), built as DOM nodes: no HTML of the text is ever parsed.
export function markdown(text) {
  const root = h('div.md');
  const lines = String(text).replace(/\r\n?/g, '\n').split('\n');
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      const body = [];
      for (i++; i < lines.length && !lines[i].trim().startsWith(fence[1]); i++) body.push(lines[i]);
      i++;
      root.append(h('pre.mdcode', { 'data-lang': fence[2] || undefined }, h('code', {}, body.join('\n'))));
      continue;
    }
    if (!line.trim()) { i++; continue; }
    const hd = /^(#{1,6})\s+(.*)$/.exec(line);
    if (hd) { root.append(h('h' + Math.min(6, hd[1].length + 2), { class: 'mdh' }, inline(hd[2]))); i++; continue; }
    if (/^\s*([-*+]|\d+[.)])\s+/.test(line)) {
      const ordered = /^\s*\d/.test(line);
      const list = h(ordered ? 'ol' : 'ul');
      while (i < lines.length && /^\s*([-*+]|\d+[.)])\s+/.test(lines[i])) {
        list.append(h('li', {}, inline(lines[i].replace(/^\s*([-*+]|\d+[.)])\s+/, ''))));
        i++;
      }
      root.append(list);
      continue;
    }
    if (/^>\s?/.test(line)) {
      const q = [];
      while (i < lines.length && /^>\s?/.test(lines[i])) q.push(lines[i++].replace(/^>\s?/, ''));
      root.append(h('blockquote', {}, inline(q.join('\n'))));
      continue;
    }
    const para = [];
    while (i < lines.length && lines[i].trim() && !/^\s*(```|~~~)/.test(lines[i]) && !/^(#{1,6})\s/.test(lines[i]) && !/^\s*([-*+]|\d+[.)])\s+/.test(lines[i]) && !/^>\s?/.test(lines[i])) para.push(lines[i++]);
    root.append(h('p', {}, inline(para.join('\n'))));
  }
  return root;
}

// inline renders `code`, **bold**, *italics* / _italics_ and [text](http...) links.
function inline(s) {
  const out = [];
  const re = /`([^`]+)`|\*\*([^*]+)\*\*|__([^_]+)__|\*([^*\s][^*]*)\*|_([^_\s][^_]*)_|\[([^\]]+)\]\((https?:\/\/[^)\s]+)\)/g;
  let last = 0;
  let m;
  while ((m = re.exec(s))) {
    if (m.index > last) out.push(s.slice(last, m.index));
    if (m[1] !== undefined) out.push(h('code', {}, m[1]));
    else if (m[2] !== undefined || m[3] !== undefined) out.push(h('strong', {}, m[2] ?? m[3]));
    else if (m[4] !== undefined || m[5] !== undefined) out.push(h('em', {}, m[4] ?? m[5]));
    else out.push(h('a', { href: m[7], target: '_blank', rel: 'noopener noreferrer' }, m[6]));
    last = re.lastIndex;
  }
  if (last < s.length) out.push(s.slice(last));
  return out;
}

export function fmtTime(s) {
  if (!s) return '';
  const d = new Date(s);
  return isNaN(d) ? s : d.toLocaleString(undefined, { dateStyle: 'short', timeStyle: 'medium' });
}
// fmtAgo is "5 min ago", "3 days ago" (the full time in its title).
export function fmtAgo(s) {
  if (!s) return '';
  const d = new Date(s);
  if (isNaN(d)) return s;
  const sec = (Date.now() - d) / 1000;
  const t = sec < 60 ? 'just now' : sec < 3600 ? `${Math.floor(sec / 60)} min ago` : sec < 86400 ? `${Math.floor(sec / 3600)} h ago`
    : sec < 86400 * 60 ? plural(Math.floor(sec / 86400), 'day') + ' ago' : d.toLocaleDateString();
  return h('time', { datetime: d.toISOString(), title: fmtTime(s) }, t);
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

// hintFor says what to do about an error: by its status, or a failed connection.
export function hintFor(err) {
  const s = err && err.status;
  if (s === 401) return 'The key was refused: sign in again with a valid key.';
  if (s === 403) return 'This key may not see that project: sign in with a key of its entity.';
  if (s === 404) return 'It may have been deleted, or the link is wrong: go back, or open the project\'s pages from the menu.';
  if (s === 413) return 'The request is too large: narrow the filter or pick fewer items.';
  if (s === 429) return 'Too many requests for this key: wait a moment and try again.';
  if (s >= 500) return 'The server failed: try again; if it keeps failing, its log says why.';
  if (err instanceof TypeError) return 'The server did not answer: check that hone serve is running, then reload.';
  return '';
}

// errorBox shows an error, what to do about it, and optionally a retry button.
export function errorBox(err, retry) {
  const hint = typeof err === 'object' ? hintFor(err) : '';
  return h('div.error', { role: 'alert' }, h('div.errmsg', {}, String(err && err.message ? err.message : err)),
    hint ? h('div.hint', {}, hint) : '',
    retry ? h('button.retry', { type: 'button', onclick: retry }, 'Try again') : '');
}

// emptyState says there is nothing here yet and what would put something here.
export const emptyState = (...what) => h('div.empty', {}, ...what);

// spinner is the loading state of a part of a page.
export const spinner = (what = 'Loading…') => h('div.loading', { role: 'status', 'aria-live': 'polite' }, h('span.spin', { 'aria-hidden': 'true' }), what);

// loading replaces el's content with the result of fn (a promise of nodes), or its error
// (with a button that tries again). Quiet keeps what el shows until the result is there (a
// refresh after a change).
// fn answers STALE when a newer load of el has begun since: el is left to that one.
export const STALE = Symbol('stale');
export async function loading(el, fn, what, quiet = false) {
  if (!quiet) clear(el, spinner(what));
  el.setAttribute('aria-busy', 'true');
  try {
    const r = await fn();
    if (r !== STALE) { clear(el, r); el.removeAttribute('aria-busy'); }
  } catch (e) {
    if (e !== STALE) { clear(el, errorBox(e, () => loading(el, fn, what))); el.removeAttribute('aria-busy'); }
  }
}

// copyText puts text on the clipboard (the async API, or a selected textarea where the page
// may not use it).
export async function copyText(text) {
  try { await navigator.clipboard.writeText(text); return; } catch { /* below */ }
  const ta = h('textarea', { value: text, style: { position: 'fixed', opacity: '0' } });
  document.body.append(ta);
  ta.select();
  const ok = document.execCommand('copy');
  ta.remove();
  if (!ok) throw new Error('the browser refused to copy');
}

// copyButton copies what get() returns and says so.
export function copyButton(get, label = 'Copy') {
  const b = h('button.copy', { type: 'button', title: label, onclick: async () => {
    try { await copyText(typeof get === 'function' ? get() : get); b.textContent = 'Copied'; b.classList.add('done'); }
    catch (e) { b.textContent = 'Copy failed'; }
    setTimeout(() => { b.textContent = label; b.classList.remove('done'); }, 1500);
  } }, label);
  return b;
}

// toast shows a short message at the bottom of the page (errors stay until closed).
export function toast(msg, kind = 'info') {
  let box = document.getElementById('toasts');
  if (!box) { box = h('div#toasts', { 'aria-live': 'polite' }); document.body.append(box); }
  const t = h('div.toast.' + kind, { role: kind === 'error' ? 'alert' : 'status' },
    h('span', {}, String(msg && msg.message ? msg.message : msg)),
    kind === 'error' && msg && typeof msg === 'object' && hintFor(msg) ? h('span.hint', {}, ' ' + hintFor(msg)) : '',
    h('button.link', { type: 'button', 'aria-label': 'Close', onclick: () => t.remove() }, '✕'));
  box.append(t);
  if (kind !== 'error') setTimeout(() => t.remove(), 4000);
  return t;
}

// download saves text as a file.
export function download(name, data, type) {
  const url = URL.createObjectURL(data instanceof Blob ? data : new Blob([data], { type }));
  const a = h('a', { href: url, download: name, style: { display: 'none' } });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

// confirmDialog asks in the page (a <dialog>), answering true or false.
export function confirmDialog(message, ok = 'Delete', danger = true) {
  return new Promise((resolve) => {
    const d = h('dialog.confirm', { 'aria-label': 'Confirm' },
      h('form', { method: 'dialog' }, h('p', {}, message),
        h('div.row', {}, h('button', { value: 'cancel', type: 'submit' }, 'Cancel'),
          h('button' + (danger ? '.dangerbtn' : '.primary'), { value: 'ok', type: 'submit', id: 'confirm-ok' }, ok))));
    d.addEventListener('close', () => { resolve(d.returnValue === 'ok'); d.remove(); });
    document.body.append(d);
    d.showModal();
  });
}

// promptDialog asks for a line of text in the page, answering it or null.
export function promptDialog(message, value = '', ok = 'OK') {
  return new Promise((resolve) => {
    const input = h('input', { value, name: 'value', 'aria-label': message, required: true });
    const d = h('dialog.confirm', { 'aria-label': message },
      h('form', { method: 'dialog' }, h('label', {}, message, input),
        h('div.row', {}, h('button', { value: 'cancel', type: 'submit', formnovalidate: true }, 'Cancel'), h('button.primary', { value: 'ok', type: 'submit', id: 'prompt-ok' }, ok))));
    d.addEventListener('close', () => { resolve(d.returnValue === 'ok' ? input.value : null); d.remove(); });
    document.body.append(d);
    d.showModal();
    input.select();
  });
}
