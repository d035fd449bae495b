// Hone Studio: the shell (sign-in, project switcher, navigation, theme, keyboard help) and the
// router that maps each URL to its view. Every view has its own URL; a change the user makes
// to a view (a filter, a sort, a page) is a new history entry, so Back undoes it.
import { session, whoami, v1, tr } from './api.js';
import { h, clear, enc, errorBox, spinner, emptyState, fmtAgo, fmtNum } from './dom.js';
import { callsView } from './traces.js';
import { evaluationsView } from './evals.js';
import { callView } from './call.js';
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

let projects = null; // the entity's projects, once loaded
let projectsLoad = null;
let current = { entity: '', project: '' };
let teardown = null;
let signInMessage = ''; // why the sign-in form is shown again (a refused key)

export function navigate(url, replace = false) {
  if (replace) history.replaceState(null, '', url); else history.pushState(null, '', url);
  render();
}

// setQuery updates the URL's query string (a view's filters, page, sort) without
// re-rendering, so that the URL can be shared. push makes it a new history entry (a change
// the user made, which Back undoes); otherwise the current entry is rewritten.
export function setQuery(params, push = false) {
  const q = new URLSearchParams(location.search);
  for (const [k, v] of Object.entries(params)) (v === '' || v === null || v === undefined || v === false) ? q.delete(k) : q.set(k, v);
  const s = q.toString();
  const url = location.pathname + (s ? '?' + s : '');
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, '', url); else history.replaceState(null, '', url);
}

export const projectBase = () => `/${enc(current.entity)}/${enc(current.project)}`;
export const project = () => current;
export const projectList = () => projects || [];
export const projectsLoaded = () => loadProjects();
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
// Menus (a <details class="colpicker">) close on a click elsewhere and on Escape.
document.addEventListener('click', (e) => { for (const d of document.querySelectorAll('details.colpicker[open]')) if (!d.contains(e.target)) d.open = false; });
document.addEventListener('keydown', (e) => { if (e.key === 'Escape') for (const d of document.querySelectorAll('details.colpicker[open]')) { d.open = false; d.querySelector('summary').focus(); } });
window.addEventListener('hone:unauthorized', () => {
  if (!session.key) return;
  signOut('The server refused the key (it may have been revoked). Sign in again.');
});

function signOut(message = '') {
  session.key = '';
  session.entity = '';
  sessionStorage.removeItem('hone.entity');
  projects = null;
  projectsLoad = null;
  signInMessage = message;
  render();
}

// Theme: follows prefers-color-scheme until toggled; the choice is kept in localStorage.
// Views that draw with colours (charts) listen for hone:theme.
function applyTheme() {
  const t = localStorage.getItem('hone.theme');
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
  window.dispatchEvent(new CustomEvent('hone:theme'));
}
export const isDark = () => (document.documentElement.dataset.theme ? document.documentElement.dataset.theme === 'dark'
  : matchMedia('(prefers-color-scheme: dark)').matches);
function toggleTheme() {
  localStorage.setItem('hone.theme', isDark() ? 'light' : 'dark');
  applyTheme();
}
matchMedia('(prefers-color-scheme: dark)').addEventListener('change', () => { if (!localStorage.getItem('hone.theme')) applyTheme(); });
applyTheme();

// loadProjects reads the entity's projects (traces and trainable models) once per sign-in,
// in the background: pages do not wait for it.
function loadProjects() {
  projectsLoad ||= (async () => {
    const names = new Set();
    const [t, m] = await Promise.allSettled([tr('/projects'), v1('GET', '/v1/preview/models?limit=100')]);
    if (t.status === 'fulfilled') for (const p of t.value.projects) names.add(p);
    if (m.status === 'fulfilled') for (const x of m.value.data || []) names.add(`${x.entity}/${x.project}`);
    projects = [...names].sort();
    if (current.project && !projects.includes(`${current.entity}/${current.project}`)) projects.push(`${current.entity}/${current.project}`);
    const sel = document.getElementById('project');
    if (sel) fillSwitcher(sel);
    return projects;
  })();
  return projectsLoad;
}

function signInView() {
  const input = h('input', { type: 'password', id: 'key', placeholder: 'API key', autocomplete: 'off', required: true, autofocus: true, 'aria-label': 'API key' });
  const msg = h('div#signin-msg', { 'aria-live': 'polite' }, signInMessage ? errorBox(signInMessage) : '');
  const button = h('button.primary', { type: 'submit' }, 'Sign in');
  const form = h('form.signin', {
    onsubmit: async (e) => {
      e.preventDefault();
      const key = input.value.trim();
      button.disabled = true;
      clear(msg, spinner('Checking the key…'));
      session.key = key;
      try {
        session.entity = await whoami(true);
        sessionStorage.setItem('hone.entity', session.entity);
        signInMessage = '';
        render();
      } catch (err) {
        session.key = '';
        button.disabled = false;
        clear(msg, errorBox(err.status === 401 ? 'That key is not valid: check it (hone keys create --entity NAME makes one) and try again.' : err));
        input.select();
      }
    },
  },
  h('h1', {}, 'Hone Studio'),
  h('p.muted', {}, 'Sign in with an API key (the initial one is in ', h('code', {}, 'hone-data/initial-api-key'), '). It is kept in this tab only.'),
  input, button, msg);
  return form;
}

// homeView: the entity's projects with their counts and last activity.
async function homeView(root) {
  root.append(h('h1', {}, 'Projects of ', session.entity));
  const [names, stats, models] = await Promise.all([loadProjects(), tr('/projects/stats').catch(() => ({ projects: [] })),
    v1('GET', '/v1/preview/models?limit=100').catch(() => ({ data: [] }))]);
  if (!names.length) {
    root.append(emptyState(h('p', {}, 'No projects yet.'), h('p', {}, 'Trace with the Weave SDK (', h('code', {}, `weave.init("${session.entity}/my-project")`),
      '), send chat completions with the header ', h('code', {}, `X-Hone-Trace-Project: ${session.entity}/my-project`), ', or train a model, and it appears here.')));
    return;
  }
  const by = new Map(stats.projects.map((p) => [p.project_id, p]));
  const nModels = {};
  for (const m of models.data || []) nModels[`${m.entity}/${m.project}`] = (nModels[`${m.entity}/${m.project}`] || 0) + 1;
  const rows = names.map((p) => ({ p, s: by.get(p) || {}, models: nModels[p] || 0 }))
    .sort((a, b) => String(b.s.last_activity_at || '').localeCompare(String(a.s.last_activity_at || '')) || a.p.localeCompare(b.p));
  root.append(h('div.tablewrap', {}, h('table.grid.projects', {},
    h('thead', {}, h('tr', {}, ['Project', 'Traces', 'Calls', 'Objects', 'Models', 'Last activity', ''].map((x) => h('th', {}, x)))),
    h('tbody', {}, rows.map(({ p, s, models: m }) => {
      const [e, n] = p.split('/');
      const b = `/${enc(e)}/${enc(n)}`;
      return h('tr', { 'data-project': p },
        h('td', {}, h('a', { href: `${b}/weave` }, p)),
        h('td.num', {}, s.traces !== undefined ? fmtNum(s.traces) : ''),
        h('td.num', {}, s.calls !== undefined ? fmtNum(s.calls) : ''),
        h('td.num', {}, s.objects !== undefined ? fmtNum(s.objects) : ''),
        h('td.num', {}, m ? fmtNum(m) : ''),
        h('td', {}, s.last_activity_at ? fmtAgo(s.last_activity_at) : h('span.muted', {}, '—')),
        h('td.links', {}, h('a', { href: `${b}/weave/evaluations` }, 'evaluations'), ' · ', h('a', { href: `${b}/training` }, 'training')));
    })))));
}

function fillSwitcher(sel) {
  const here = `${current.entity}/${current.project}`;
  clear(sel, h('option', { value: '', disabled: true, selected: !current.project }, 'Project…'),
    (projects || (current.project ? [here] : [])).map((p) => h('option', { value: p, selected: p === here }, p)));
}

function shell(section) {
  const sel = h('select#project', {
    'aria-label': 'Project',
    onchange: () => { const [e, p] = sel.value.split('/'); navigate(`/${enc(e)}/${enc(p)}/${section === 'training' ? 'training' : 'weave'}`); },
  });
  fillSwitcher(sel);
  const base = projectBase();
  const nav = (href, label, key, name) => h('a' + (section === name ? '.active' : ''), { href, title: `g ${key}`, 'aria-current': section === name ? 'page' : undefined }, label);
  const hasProject = !!current.project;
  return h('header.top', {},
    h('a.brand', { href: '/', title: 'Projects (g h)' }, 'Hone Studio'),
    sel,
    h('nav', { 'aria-label': 'Sections' },
      hasProject && nav(base + '/weave', 'Traces', 't', 'traces'),
      hasProject && nav(base + '/weave/objects', 'Objects', 'o', 'objects'),
      hasProject && nav(base + '/weave/evaluations', 'Evaluations', 'e', 'evaluations'),
      hasProject && nav(base + '/training', 'Training', 'r', 'training'),
      nav('/playground', 'Playground', 'p', 'playground')),
    h('div.tools', {},
      h('span.muted', { id: 'whoami', title: 'The key\'s entity' }, session.entity),
      h('button.icon', { type: 'button', title: 'Keyboard shortcuts (?)', 'aria-label': 'Keyboard shortcuts', onclick: showHelp }, '?'),
      h('button.icon', { type: 'button', title: 'Toggle theme (shift+t)', onclick: toggleTheme, 'aria-label': 'Toggle theme' }, '◐'),
      h('button.icon#signout', { type: 'button', title: 'Sign out', onclick: () => signOut() }, 'Sign out')));
}

// The keyboard help, in the page.
const KEYS = [
  ['g t', 'Traces (calls table)'], ['g o', 'Objects'], ['g e', 'Evaluations'], ['g r', 'Training'], ['g p', 'Playground'], ['g h', 'Projects'],
  ['/', 'Focus the page\'s filter or search'], ['j / k, ↓ / ↑', 'Move in tables and the trace tree'], ['Enter', 'Open the selected row'],
  ['← / →', 'Collapse / expand in the trace tree'], ['x', 'Pick the selected call (calls table)'], ['shift+t', 'Toggle light and dark'], ['?', 'This help'], ['Esc', 'Close dialogs'],
];
function showHelp() {
  if (document.getElementById('help')) return;
  const d = h('dialog#help', { 'aria-labelledby': 'help-title' },
    h('h2#help-title', {}, 'Keyboard shortcuts'),
    h('table.keys', {}, h('tbody', {}, KEYS.map(([k, what]) => h('tr', {}, h('td', {}, k.split(' ').flatMap((x, i) => [i ? ' ' : '', x === '/' && k !== '/' ? '/' : h('kbd', {}, x)])), h('td', {}, what))))),
    h('form', { method: 'dialog' }, h('button.primary', { type: 'submit', autofocus: true }, 'Close')));
  d.addEventListener('close', () => d.remove());
  document.body.append(d);
  d.showModal();
}

let renderSeq = 0;
export async function render() {
  if (teardown) { teardown(); teardown = null; }
  const seq = ++renderSeq;
  for (const d of document.querySelectorAll('dialog[open]')) d.close();
  if (!session.key) { document.title = 'Hone Studio'; clear(app, signInView()); return; }
  if (!session.entity) session.entity = sessionStorage.getItem('hone.entity') || '';
  if (!session.entity) {
    clear(app, h('main', {}, spinner('Signing in…')));
    try { session.entity = await whoami(); sessionStorage.setItem('hone.entity', session.entity); } catch (e) {
      if (seq !== renderSeq) return;
      if (e.status === 401) return; // signed out by hone:unauthorized
      clear(app, h('main', {}, errorBox(e, render)));
      return;
    }
    if (seq !== renderSeq) return;
  }
  // The project list is for the switcher: read once the page has what it came for.
  if (!projectsLoad) (window.requestIdleCallback || setTimeout)(() => loadProjects(), { timeout: 1500 });
  const path = location.pathname.replace(/\/+$/, '') || '/';
  let match = null;
  for (const [re, view, section] of routes) {
    const m = re.exec(path);
    if (m) { match = { view, section, params: m.slice(1).map(decodeURIComponent) }; break; }
  }
  if (match && /\/(weave|training|r)\b/.test(path)) {
    current = { entity: match.params[0], project: match.params[1] };
    if (current.entity !== session.entity) {
      clear(app, shell(''), h('main', {}, errorBox(`This key belongs to entity "${session.entity}"; project ${current.entity}/${current.project} is not visible to it. Sign out and sign in with a key of "${current.entity}", or open one of your projects.`),
        h('p', {}, h('a', { href: '/' }, 'Your projects'))));
      current = { entity: '', project: '' };
      return;
    }
    localStorage.setItem('hone.project.' + session.entity, current.project);
    if (projects && !projects.includes(`${current.entity}/${current.project}`)) projects.push(`${current.entity}/${current.project}`);
  } else if (match && match.section === 'playground') {
    // Pages outside a project keep the last one the user was in, for the menu.
    const last = localStorage.getItem('hone.project.' + session.entity);
    current = last ? { entity: session.entity, project: last } : { entity: '', project: '' };
  } else current = { entity: '', project: '' };
  // The page's loading state shows until the view puts something in main (CSS hides it then).
  const main = h('main', { id: 'main' }, h('div.page-loading', {}, spinner()));
  clear(app, h('a.skip', { href: '#main', onclick: (e) => { e.preventDefault(); main.focus(); } }, 'Skip to content'), shell(match ? match.section : ''), main);
  main.tabIndex = -1;
  if (!match) {
    main.append(errorBox('There is no page at ' + path + '. Check the link, or start from your projects.'), h('p', {}, h('a', { href: '/' }, 'Projects')));
    return;
  }
  document.title = 'Hone Studio' + (current.project && match.section ? ` · ${match.section} · ${current.project}` : '');
  try {
    await match.view(main, match.params, new URLSearchParams(location.search));
  } catch (e) {
    if (seq !== renderSeq) return;
    main.append(errorBox(e, render));
  }
}

// Keyboard: g then t/o/e/r/p/h goes to a section; / focuses the page's filter; shift+t toggles
// the theme; ? shows the keys. Tables and the trace tree handle j/k/arrows/Enter themselves.
let pendingG = 0;
document.addEventListener('keydown', (e) => {
  if (e.target.closest('input, textarea, select, [contenteditable], dialog') || e.ctrlKey || e.metaKey || e.altKey) return;
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
  if (e.key === '?') { e.preventDefault(); showHelp(); }
});

render();
