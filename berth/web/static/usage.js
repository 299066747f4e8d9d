// berth dashboard: the Now / Usage tabs, and the Usage tab (GET /api/usage: `berth report`'s
// rows over the last 30 days, those the viewer may see: their own and the totals; an admin's:
// everyone's). A bar per day, stacked by user; per user and per project tables.
'use strict';

let usage = null;  // the last /api/usage answer
const USAGE_REFRESH = 60000;

function showTab(which) {
  for (const name of ['now', 'usage']) {
    const on = name === which;
    const tab = $('tab-' + name);
    tab.setAttribute('aria-selected', String(on)); tab.tabIndex = on ? 0 : -1;
    $('panel-' + name).hidden = !on;
  }
  if (which === 'usage') loadUsage(); else drawCharts();
}

async function loadUsage() {
  try {
    const r = await fetch('/api/usage', { headers: authHeaders(), cache: 'no-store' });
    if (!r.ok) { $('usage-note').textContent = 'cannot read usage (' + r.status + ')'; return; }
    usage = await r.json();
    renderUsage();
  } catch (e) { /* the next visit or refresh retries */ }
}

function hours(v) { return v === null || v === undefined ? '–' : Number(v).toFixed(2); }

function usageRow(key, r) {
  return el('tr', { 'data-key': r[key] || '-' },
    el('td', { class: 'key', text: r[key] || '–' }), el('td', { class: 'num jobs', text: String(r.jobs) }),
    el('td', { class: 'num gpuh', text: hours(r.gpu_hours) }), el('td', { class: 'num', text: hours(r.queued_hours) }),
    el('td', { class: 'num', text: r.util === null ? '–' : Math.round(r.util) + '%' }));
}

function renderUsage() {
  if (!usage) return;
  const t = usage.totals;
  $('usage-note').textContent = `last ${usage.days} days, ${hours(t.gpu_hours)} GPU-h in all` +
    (usage.scope === 'all' ? '' : usage.scope === 'anonymous' ? ' (sign in to see your rows)' : `; rows: ${usage.scope}'s`);
  $('usage-users').replaceChildren(...usage.users.map((r) => usageRow('user', r)));
  $('usage-projects').replaceChildren(...usage.projects.map((r) => usageRow('project', r)));
  drawUsage();
}

function drawUsage() {
  if (!usage || $('panel-usage').hidden) return;
  const users = [...new Set(usage.daily.map((r) => r.user))].sort();
  const days = [];
  for (let d = Math.floor(usage.since / 86400) * 86400; d < usage.until; d += 86400)
    days.push(new Date(d * 1000).toISOString().slice(0, 10));
  const per = new Map(days.map((d) => [d, new Map()]));
  for (const r of usage.daily) if (per.has(r.day)) per.get(r.day).set(r.user, r.gpu_hours);
  const top = Math.max(1, ...days.map((d) => [...per.get(d).values()].reduce((a, b) => a + b, 0)));
  const ymax = Math.ceil(top * 1.1 * 100) / 100;
  const c = setupCanvas($('usage-chart'));
  const t0 = Math.floor(usage.since / 86400) * 86400, t1 = t0 + days.length * 86400;
  const f = frame(c.g, c.w, c.h, t0, t1, ymax, (v) => v.toFixed(v < 10 ? 1 : 0),
    (t) => new Date(t * 1000).toISOString().slice(5, 10));  // (UTC days: MM-DD)
  const bw = Math.max(2, (f.x(t0 + 86400) - f.x(t0)) * 0.8);
  days.forEach((d, k) => {
    let base = 0;
    users.forEach((u, j) => {
      const v = per.get(d).get(u) || 0; if (!v) return;
      c.g.fillStyle = GPU_COLORS[j % GPU_COLORS.length];
      const x = f.x(t0 + k * 86400) + 1, y0 = f.y(base), y1 = f.y(base + v);
      c.g.fillRect(x, y1, bw, y0 - y1); base += v;
    });
  });
  $('usage-legend').replaceChildren(...users.map((u, j) =>
    el('span', {}, el('i', { class: 'sw', style: 'background:' + GPU_COLORS[j % GPU_COLORS.length] }), u)));
  const busiest = days.reduce((b, d) => { const s = [...per.get(d).values()].reduce((a, x) => a + x, 0); return s > b[1] ? [d, s] : b; }, ['', 0]);
  $('usage-chart').setAttribute('aria-label', `GPU-hours per day over the last ${usage.days} days, by user: ` +
    `${hours(usage.totals.gpu_hours)} in all` + (busiest[1] ? `, most on ${busiest[0]} (${hours(busiest[1])})` : ''));
}

function bindTabs() {
  const tabs = [$('tab-now'), $('tab-usage')];
  tabs.forEach((t, k) => {
    t.addEventListener('click', () => showTab(t.id.slice(4)));
    t.addEventListener('keydown', (e) => {  // (the arrows move between tabs: ARIA's tab pattern)
      if (e.key !== 'ArrowRight' && e.key !== 'ArrowLeft') return;
      const next = tabs[(k + (e.key === 'ArrowRight' ? 1 : tabs.length - 1)) % tabs.length];
      next.focus(); showTab(next.id.slice(4));
    });
  });
  window.addEventListener('resize', drawUsage);
  setInterval(() => { if (!$('panel-usage').hidden) loadUsage(); }, USAGE_REFRESH);
  if (location.hash === '#usage') showTab('usage');
}

document.addEventListener('DOMContentLoaded', bindTabs);
