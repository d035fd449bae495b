// Line charts over training steps, drawn with the vendored uPlot (drag to zoom, double click to
// reset): as wide as their place on the page (redrawn when it changes), in the theme's colours
// (redrawn when it changes), integer steps on the x axis, a linear or log y axis, optional
// smoothing (an exponential moving average, the raw points kept faint behind it) and bands (a
// spread around a curve).
import uPlot from './vendor/uPlot.esm.js';
import { h } from './dom.js';

// Series colours that keep 3:1 against both themes' panels.
const LIGHT = ['#b06a00', '#1f62b0', '#17803f', '#b3306b', '#6b46c1', '#b4481b', '#0f7f85', '#5f5c55'];
const DARK = ['#f0a92e', '#6aa8f2', '#4cc38a', '#ef7fb0', '#a98bf0', '#f08a5d', '#45c4cb', '#b8b4ac'];

// controls are the page's chart settings; charts made with them redraw when they change.
export function chartControls(onChange) {
  const ctl = { smooth: +(localStorage.getItem('hone.smooth') || 0), log: false, listeners: new Set() };
  const changed = () => { for (const f of ctl.listeners) f(); if (onChange) onChange(); };
  const smooth = h('input#smoothing', { type: 'range', min: 0, max: 0.99, step: 0.01, value: ctl.smooth, 'aria-label': 'Smoothing',
    oninput: () => { ctl.smooth = +smooth.value; out.textContent = ctl.smooth.toFixed(2); localStorage.setItem('hone.smooth', String(ctl.smooth)); changed(); } });
  const out = h('output', {}, ctl.smooth.toFixed(2));
  const log = h('input#logscale', { type: 'checkbox', onchange: () => { ctl.log = log.checked; changed(); } });
  ctl.el = h('div.chartctl', {}, h('label', {}, 'Smoothing ', smooth, ' ', out), h('label', {}, log, ' log scale'), h('span.muted', {}, 'drag to zoom, double-click to reset'));
  return ctl;
}

function ema(ys, a) {
  let prev = null;
  return ys.map((y) => {
    if (y === null || y === undefined) return null;
    prev = prev === null ? y : a * prev + (1 - a) * y;
    return prev;
  });
}

const css = (name, dflt) => getComputedStyle(document.documentElement).getPropertyValue(name).trim() || dflt;
const isDarkNow = () => (document.documentElement.dataset.theme ? document.documentElement.dataset.theme === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches);

// lineChart puts a chart titled title in el and returns update(series, opts): series is
// {label: [[x, y], ...]}; opts.bands is [[upper label, lower label], ...], drawn as a filled
// spread (the two curves themselves thin). ctl is the page's chartControls (or none).
export function lineChart(el, title, ctl) {
  let u = null;
  let last = null;
  let key = '';
  const box = h('figure.chart', { 'data-chart': title }, h('figcaption.charttitle', {}, title));
  const plot = h('div.plot');
  box.append(plot);
  el.append(box);
  const width = () => Math.max(240, (box.clientWidth || el.clientWidth || 600) - 18);

  function build() {
    const { series, bands = [] } = last;
    const names = Object.keys(series);
    const xs = [...new Set(names.flatMap((n) => series[n].map((p) => p[0])))].sort((a, b) => a - b);
    const smooth = ctl && ctl.smooth > 0;
    const banded = new Set(bands.flat());
    const cols = names.map((n) => { const m = new Map(series[n]); return xs.map((x) => (m.has(x) ? m.get(x) : null)); });
    const positive = cols.every((c) => c.every((y) => y === null || y > 0));
    const log = ctl && ctl.log && positive;
    box.dataset.points = String(xs.length);
    box.dataset.scale = log ? 'log' : 'linear';
    const colors = isDarkNow() ? DARK : LIGHT;
    const fg = css('--muted', '#888');
    const grid = css('--line', '#ddd');
    const data = [xs];
    const sers = [{ label: 'step' }];
    names.forEach((n, i) => {
      const color = colors[i % colors.length];
      if (smooth && !banded.has(n)) {
        data.push(cols[i]);
        sers.push({ label: n + ' (raw)', stroke: color + '55', width: 1, spanGaps: true, points: { show: false } });
        data.push(ema(cols[i], ctl.smooth));
        sers.push({ label: n, stroke: color, width: 2, spanGaps: true, points: { show: xs.length < 3, size: 5 } });
      } else {
        data.push(cols[i]);
        sers.push({ label: n, stroke: banded.has(n) ? color + '99' : color, width: banded.has(n) ? 1 : 2, spanGaps: true, points: { size: 5, show: xs.length < 60 } });
      }
    });
    const idx = (n) => sers.findIndex((s) => s.label === n);
    const uBands = bands.map(([hi, lo]) => ({ series: [idx(hi), idx(lo)], fill: colors[names.indexOf(hi) % colors.length] + '33' })).filter((b) => b.series[0] > 0 && b.series[1] > 0);
    const one = xs.length === 1;
    if (u) u.destroy();
    plot.replaceChildren();
    u = new uPlot({
      width: width(), height: 220,
      scales: {
        x: { time: false, range: (self, min, max) => (one || min === max ? [min - 1, max + 1] : [min, max]) },
        y: log ? { distr: 3 } : {},
      },
      bands: uBands,
      cursor: { drag: { x: true, y: false } },
      legend: { live: true },
      series: sers,
      axes: [
        { stroke: fg, grid: { stroke: grid }, ticks: { stroke: grid }, incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000, 100000], values: (s, v) => { box.dataset.xticks = v.join(','); return v.map((x) => (Number.isInteger(x) ? x.toLocaleString() : '')); } },
        { stroke: fg, grid: { stroke: grid }, ticks: { stroke: grid }, size: 64 },
      ],
    }, data, plot);
    box.dataset.theme = isDarkNow() ? 'dark' : 'light';
  }

  const ro = new ResizeObserver(() => { if (u && Math.abs(u.width - width()) > 4) u.setSize({ width: width(), height: 220 }); });
  ro.observe(box);
  const onTheme = () => { if (!box.isConnected) { window.removeEventListener('hone:theme', onTheme); ro.disconnect(); return; } if (last) build(); };
  window.addEventListener('hone:theme', onTheme);
  const onCtl = () => { if (!box.isConnected) { ctl.listeners.delete(onCtl); return; } if (last) build(); };
  if (ctl) ctl.listeners.add(onCtl);

  return (series, opts = {}) => {
    last = { series, bands: opts.bands };
    const k = Object.keys(series).join('\n') + '|' + JSON.stringify(opts.bands || []);
    const names = Object.keys(series);
    if (!u || k !== key || (ctl && ctl.smooth > 0)) { key = k; build(); return; }
    const xs = [...new Set(names.flatMap((n) => series[n].map((p) => p[0])))].sort((a, b) => a - b);
    const data = [xs, ...names.map((n) => { const m = new Map(series[n]); return xs.map((x) => (m.has(x) ? m.get(x) : null)); })];
    if (xs.length === 1 || box.dataset.points === '1' || (ctl && ctl.log)) { build(); return; }
    box.dataset.points = String(xs.length);
    u.setData(data);
  };
}
