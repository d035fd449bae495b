// Hone Studio: the shell (sign-in, project switcher, navigation, theme, keyboard) and the
// router that maps each URL to its view. Every view has its own URL.
import { session, whoami, v1, tr } from './api.js';
import { h, clear, enc, errorBox } from './dom.js';
import { callsView, callView, evaluationsView } from './traces.js';
import { objectsView, objectView, tableView } from './objects.js';
import { trainingView, jobView, modelView } from './training.js';
import { playgroundView } from './playground.js';

const app = document.getElementById('app');

// Routes: [pattern, view, section]. A view gets (root element, params, URLSearchParams).
const routes = [
  [/^\/$/, homeView, ''],
  [/^\/playground$/, playgroundView, 'playground'],
  [/^\/([^/]+)\/([^/]+)\/weave(?:\/calls)?$/, callsView, 'traces'],
  [/^\/([^/]+)\/([^/]+)\/(?:weave\/calls|r\/call)\/([^/]+)$/, callView, 'traces'],
  [/^\/([^/]+)\/([^/]+)\/weave\/objects$/, objectsView, 'objects'],
  [/^\/([^/]+)\/([^/]+)\/weave\/objects\/([^/]+)$/, objectView, 'objects'],
  [/^\/([^/]+)\/([^/]+)\/weave\/tables\/([^/]+)$/, tableView, 'objects'],
  [/^\/([^/]+)\/([^/]+)\/weave\/evaluations$/, evaluationsView, 'evaluations'],
  [/^\/([^/]+)\/([^/]+)\/training$/, trainingView, 'training'],
  [/^\/([^/]+)\/([^/]+)\/training\/jobs\/([^/]+)$/, jobView, 'training'],
  [/^\/([^/]+)\/([^/]+)\/training\/models\/([^/]+)$/, modelView, 'training'],
];

let projects = [];
let current = { entity: '', project: '' };
let teardown = null;

export function navigate(url, replace = false) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  render();
}

// setQuery updates the URL's query string in place (a view's filters, page, sort) without
// re-rendering, so that the URL can be shared.
export function setQuery(params) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) (v === '' || v === null || v === undefined || v === false) ? q.delete(k) : q.set(k, v);
  const s = q.toString();
  history.replaceState(null, '', location.pathname + (s ? '?' + s : ''));
}

export const projectBase = () => `/${enc(current.entity)}/${enc(current.project)}`;
export const project = () => current;
export const onTeardown = (fn) => { const prev = teardown; teardown = () => { prev && prev(); fn(); }; };

document.addEventListener('click', (e) => {
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || a.target || e.ctrlKey || e.metaKey || e.shiftKey || e.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/studio/') || a.hasAttribute('download')) return;
  e.preventDefault();
  navigate(url.pathname + url.search + url.hash);
});
window.addEventListener('popstate', render);
window.addEventListener('hone:unauthorized', () => { if (session.key) { session.key = ''; render(); } });

// Theme: follows prefers-color-scheme until toggled; the choice is kept in localStorage.
function applyTheme() {
  const t = localStorage.getItem('hone.theme');
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
}
function toggleTheme() {
  const dark = document.documentElement.dataset.theme ? document.documentElement.dataset.theme === 'dark'
    : matchMedia('(prefers-color-scheme: dark)').matches;
  localStorage.setItem('hone.theme', dark ? 'light' : 'dark');
  applyTheme();
}
applyTheme();

async function loadProjects() {
  const names = new Set();
  const [t, m] = await Promise.allSettled([tr('/projects'), v1('GET', '/v1/preview/models?limit=100')]);
  if (t.status === 'fulfilled') for (const p of t.value.projects) names.add(p);
  if (m.status === 'fulfilled') for (const x of m.value.data || []) names.add(`${x.entity}/${x.project}`);
  projects = [...names].sort();
}

function signInView() {
  const input = h('input', { type: 'password', id: 'key', placeholder: 'API key', autocomplete: 'off', required: true, autofocus: true });
  const msg = h('div');
  const form = h('form.signin', {
    onsubmit: async (e) => {
      e.preventDefault();
      session.key = input.value.trim();
      try {
        session.entity = await whoami();
        await loadProjects();
        render();
      } catch (err) {
        session.key = '';
        clear(msg, errorBox(err.status === 401 ? 'That key is not valid.' : err));
      }
    },
  },
  h('h1', {}, 'Hone Studio'),
  h('p.muted', {}, 'Sign in with an API key (the initial one is in ', h('code', {}, 'hone-data/initial-api-key'), '). It is kept in this tab only.'),
  input, h('button.primary', { type: 'submit' }, 'Sign in'), msg);
  return form;
}

function homeView(root) {
  root.append(h('h1', {}, 'Projects of ', session.entity));
  if (!projects.length) {
    root.append(h('p.muted', {}, 'No projects yet. Trace with the Weave SDK (', h('code', {}, `weave.init("${session.entity}/my-project")`), '), or train a model, and it appears here.'));
  }
  root.append(h('ul.projects', {}, projects.map((p) => {
    const [e, n] = p.split('/');
    return h('li', {}, h('a', { href: `/${enc(e)}/${enc(n)}/weave` }, p), ' · ',
      h('a', { href: `/${enc(e)}/${enc(n)}/training` }, 'training'));
  })));
}

function shell(section) {
  const sel = h('select#project', {
    'aria-label': 'Project',
    onchange: () => { const [e, p] = sel.value.split('/'); navigate(`/${enc(e)}/${enc(p)}/${section === 'training' ? 'training' : 'weave'}`); },
  }, h('option', { value: '', disabled: true, selected: !current.project }, 'Project…'),
  projects.map((p) => h('option', { value: p, selected: p === `${current.entity}/${current.project}` }, p)));
  const base = projectBase();
  const nav = (href, label, key, name) => h('a' + (section === name ? '.active' : ''), { href, title: `g ${key}` }, label);
  const hasProject = !!current.project;
  return h('header.top', {},
    h('a.brand', { href: '/' }, 'Hone Studio'),
    sel,
    h('nav', {},
      hasProject && nav(base + '/weave', 'Traces', 't', 'traces'),
      hasProject && nav(base + '/weave/objects', 'Objects', 'o', 'objects'),
      hasProject && nav(base + '/weave/evaluations', 'Evaluations', 'e', 'evaluations'),
      hasProject && nav(base + '/training', 'Training', 'r', 'training'),
      nav('/playground', 'Playground', 'p', 'playground')),
    h('span.spacer'),
    h('span.muted', { id: 'whoami' }, session.entity),
    h('button.icon', { title: 'Toggle theme (shift+t)', onclick: toggleTheme, 'aria-label': 'Toggle theme' }, '◐'),
    h('button.icon', { title: 'Sign out', onclick: () => { session.key = ''; render(); } }, 'Sign out'));
}

export async function render() {
  if (teardown) { teardown(); teardown = null; }
  if (!session.key) { clear(app, signInView()); return; }
  if (!session.entity) {
    try { session.entity = await whoami(); await loadProjects(); } catch (e) { clear(app, signInView()); return; }
  }
  const path = location.pathname.replace(/\/+$/, '') || '/';
  let match = null;
  for (const [re, view, section] of routes) {
    const m = re.exec(path);
    if (m) { match = { view, section, params: m.slice(1).map(decodeURIComponent) }; break; }
  }
  if (match && /\/(weave|training|r)\b/.test(path)) {
    current = { entity: match.params[0], project: match.params[1] };
    if (current.entity !== session.entity) {
      clear(app, shell(''), h('main', {}, errorBox(`This key belongs to entity "${session.entity}"; project ${current.entity}/${current.project} is not visible to it.`)));
      return;
    }
    if (!projects.includes(`${current.entity}/${current.project}`)) projects.push(`${current.entity}/${current.project}`);
  }
  const main = h('main');
  clear(app, shell(match ? match.section : ''), main);
  if (!match) { main.append(errorBox('No page at ' + path), h('p', {}, h('a', { href: '/' }, 'Projects'))); return; }
  document.title = 'Hone Studio' + (current.project && match.section ? ` · ${current.project}` : '');
  try {
    await match.view(main, match.params, new URLSearchParams(location.search));
  } catch (e) { main.append(errorBox(e)); }
}

// Keyboard: g then t/o/e/r/p goes to a section; / focuses the page's filter; shift+t toggles
// the theme; ? shows the keys. Tables and the trace tree handle j/k/arrows/Enter themselves.
let pendingG = 0;
document.addEventListener('keydown', (e) => {
  if (e.target.closest('input, textarea, select, [contenteditable]') || e.ctrlKey || e.metaKey || e.altKey) return;
  if (pendingG && Date.now() - pendingG < 1500) {
    pendingG = 0;
    const base = projectBase();
    const to = { t: base + '/weave', o: base + '/weave/objects', e: base + '/weave/evaluations', r: base + '/training', p: '/playground', h: '/' }[e.key];
    if (to && (current.project || e.key === 'p' || e.key === 'h')) { e.preventDefault(); navigate(to); }
    return;
  }
  if (e.key === 'g') { pendingG = Date.now(); return; }
  if (e.key === '/') { const f = document.querySelector('[data-filter]'); if (f) { e.preventDefault(); f.focus(); } return; }
  if (e.key === 'T') { toggleTheme(); return; }
  if (e.key === '?') { alert('Keys:\n g t traces · g o objects · g e evaluations · g r training · g p playground · g h projects\n / filter · j/k or ↑/↓ move · Enter open · ←/→ collapse/expand in the trace tree\n shift+t theme'); }
});

render();
