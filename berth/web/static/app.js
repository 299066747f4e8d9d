// berth dashboard. Plain script, no build step, no library. Every value from the daemon goes
// into the page as text (textContent), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'berth.token';
const FINISHED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'LOST', 'PREEMPTED']);
const GPU_COLORS = ['#58a6ff', '#3fb950', '#d29922', '#a371f7', '#39c5bb', '#f778ba', '#ffa657', '#79c0ff',
  '#56d364', '#e3b341', '#bc8cff', '#ff7b72'];

// The token lives in this tab's sessionStorage only (gone with the tab; docs/web.md says why),
// and it expires on the daemon's side anyway ([daemon] web_token_ttl).
try { localStorage.removeItem(TOKEN_KEY); } catch (e) { /* (what older versions kept) */ }
let token = sessionStorage.getItem(TOKEN_KEY);
let viewer = null;        // {user, uid, admin} once a token is accepted
let state = null;         // the last state event
let hist = null;          // {gpus, points}
let filter = 'all';
let selected = null;      // job id whose log is followed
let logStream = 'out';
let logOffset = null;
let logTimer = null;
let streamAbort = null;

function el(tag, props, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') e.className = v;
    else if (k === 'text') e.textContent = v;
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else if (k === 'style') e.style.cssText = v;
    else e.setAttribute(k, v);
  }
  for (const kid of kids.flat()) if (kid !== null && kid !== undefined && kid !== false)
    e.append(kid instanceof Node ? kid : String(kid));
  return e;
}

function authHeaders() { return token ? { Authorization: 'Bearer ' + token } : {}; }

function fmtBytes(b) {
  if (b === null || b === undefined) return 'n/a';
  const g = b / 1073741824;
  return g >= 100 ? g.toFixed(0) + ' GiB' : g >= 1 ? g.toFixed(1) + ' GiB' : (b / 1048576).toFixed(0) + ' MiB';
}
function fmtDur(s) {
  if (s === null || s === undefined || !isFinite(s)) return '';
  s = Math.max(0, Math.round(s));
  if (s < 60) return s + 's';
  if (s < 3600) return Math.floor(s / 60) + 'm ' + String(s % 60).padStart(2, '0') + 's';
  if (s < 86400) return Math.floor(s / 3600) + 'h ' + String(Math.floor(s / 60) % 60).padStart(2, '0') + 'm';
  return Math.floor(s / 86400) + 'd ' + Math.floor(s / 3600) % 24 + 'h';
}
function fmtGpus(n) { return n >= 1 ? String(n) : '×' + n; }
function clock(t, secs) {
  const d = new Date(t * 1000), p = (v) => String(v).padStart(2, '0');
  return p(d.getHours()) + ':' + p(d.getMinutes()) + (secs ? ':' + p(d.getSeconds()) : '');
}

function toast(msg, bad) {
  const t = $('toast');
  t.textContent = msg; t.className = 'toast' + (bad ? ' bad' : ''); t.hidden = false;
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.hidden = true; }, 4000);
}

// -- sign in ------------------------------------------------------------------------------

async function whoami() {
  if (!token) { viewer = null; renderWho(); return; }
  try {
    const r = await fetch('/api/whoami', { headers: authHeaders(), cache: 'no-store' });
    if (r.status === 401) { setToken(null); toast('That token is not valid here (expired or revoked?): run `berth web-token` again.', true); return; }
    viewer = r.ok ? await r.json() : null;
  } catch (e) { viewer = null; }
  renderWho(); if (state) render();
}

function setToken(t) {
  token = t;
  if (t) sessionStorage.setItem(TOKEN_KEY, t); else sessionStorage.removeItem(TOKEN_KEY);
  viewer = null; renderWho(); restartStream();
  if (state) render();
  if (selected !== null) followLog(selected);
}

function renderWho() {
  $('who').replaceChildren(viewer ? el('span', {}, el('em', { text: 'signed in as ' }), viewer.user, viewer.admin ? el('em', { text: ' (admin)' }) : null) : '');
  $('signin-btn').hidden = !!viewer;
  $('signout-btn').hidden = !viewer;
}

function bindSignIn() {
  const dlg = $('signin');
  $('signin-btn').addEventListener('click', () => { $('signin-err').textContent = ''; $('token-input').value = ''; dlg.showModal(); });
  $('signin-cancel').addEventListener('click', () => dlg.close());
  $('signout-btn').addEventListener('click', () => setToken(null));
  $('signin-form').addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const t = $('token-input').value.trim();
    const r = await fetch('/api/whoami', { headers: { Authorization: 'Bearer ' + t }, cache: 'no-store' });
    if (!r.ok) { $('signin-err').textContent = 'Not accepted: paste exactly what `berth web-token` prints.'; return; }
    dlg.close(); setToken(t); whoami();
  });
}

// -- live updates (server-sent events over fetch, so the token can go in a header) ----------

function setLive(on, text) {
  $('live').className = 'live' + (on ? ' on' : '');
  $('live-text').textContent = text || (on ? 'live' : 'offline');
}

function restartStream() { if (streamAbort) streamAbort.abort(); }

async function stream() {
  for (;;) {
    streamAbort = new AbortController();
    try {
      const r = await fetch('/api/events', { headers: authHeaders(), cache: 'no-store', signal: streamAbort.signal });
      if (r.status === 401) { setLive(false, 'sign in to view'); showBanner('This dashboard needs a sign-in to view: run `berth web-token`.'); }
      if (r.ok) {
        setLive(true);
        const reader = r.body.getReader();
        const dec = new TextDecoder();
        let buf = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) break;
          buf += dec.decode(value, { stream: true });
          let i;
          while ((i = buf.indexOf('\n\n')) >= 0) { onEvent(buf.slice(0, i)); buf = buf.slice(i + 2); }
        }
      }
    } catch (e) { /* aborted or dropped: reconnect */ }
    setLive(false);
    await new Promise((res) => setTimeout(res, streamAbort.signal.aborted ? 50 : 2000));
    if (!hist) loadHistory();
  }
}

function onEvent(chunk) {
  let kind = 'message'; const data = [];
  for (const line of chunk.split('\n')) {
    if (line.startsWith('event:')) kind = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).trimStart());
  }
  if (!data.length) return;
  const msg = JSON.parse(data.join('\n'));
  if (kind === 'state') { state = msg; state.received = Date.now() / 1000; render(); }
  else if (kind === 'sample' && hist) {
    if (String(msg.gpus) !== String(hist.gpus)) { loadHistory(); return; }
    hist.points.push(...msg.points);
    const cut = Date.now() / 1000 - 86400;
    while (hist.points.length && hist.points[0][0] < cut) hist.points.shift();
    drawCharts();
  }
}

async function loadHistory() {
  try {
    const r = await fetch('/api/history', { headers: authHeaders(), cache: 'no-store' });
    if (r.ok) { hist = await r.json(); drawCharts(); }
  } catch (e) { /* next reconnect retries */ }
}

function showBanner(text) { const b = $('banner'); b.textContent = text || ''; b.hidden = !text; }

// -- rendering ----------------------------------------------------------------------------

function render() {
  const s = state;
  const c = s.queue.counts;
  const running = (c.RUNNING || 0) + (c.COMPLETING || 0);
  $('summary').replaceChildren(
    el('b', { text: s.host }), ' · ', el('b', { text: String(s.gpus.length) }), ' GPUs · ',
    el('b', { text: String(running) }), ' running · ', el('b', { text: String(c.PENDING || 0) }), ' waiting',
    c.HELD ? ` (${c.HELD} held)` : '', ' · policy ', s.daemon.policy);
  const warn = [];
  if (s.daemon.queue_paused) warn.push('The queue is paused after an unclean stop: nothing starts until `berth resume --all`.');
  if (s.daemon.gpu_error) warn.push('Cannot read the GPUs: ' + s.daemon.gpu_error);
  showBanner(warn.join(' '));
  renderGpus(s.gpus);
  renderQueue(s.queue);
  renderUsers(s.users);
}

function meter(label, frac, text, kind) {
  const pct = Math.max(0, Math.min(100, (frac || 0) * 100));
  let cls = 'bar ' + kind;
  if (kind === 'util') cls += pct >= 90 ? ' hot' : pct >= 60 ? ' warm' : '';
  return el('div', { class: 'meter' }, el('span', { class: 'lbl', text: label }),
    el('div', { class: cls }, el('i', { style: `width:${pct.toFixed(1)}%` })),
    el('span', { class: 'val', text }));
}

function holderItem(h) {
  if (h.kind === 'job') {
    const share = h.share < 1 ? ` (${h.share} of it)` : '';
    return el('li', {}, el('span', { class: 'tag job', text: 'job' }),
      el('a', { class: 'what', onclick: () => select(h.id), text: `${h.id} ${h.name}${share}` }),
      el('span', { class: 'user', text: h.user }));
  }
  if (h.kind === 'outside') return el('li', {}, el('span', { class: 'tag outside', text: 'other' }), el('span', { class: 'what', text: h.label }));
  const share = h.share < 1 ? ` (${h.share} of it)` : '';
  return el('li', { title: h.command || '' }, el('span', { class: 'tag ' + h.kind, text: h.kind === 'claim' ? 'run' : 'wait' }),
    el('span', { class: 'user', text: h.user }),
    el('span', { class: 'what', text: (h.command || (h.pid ? 'pid ' + h.pid : '')) + share }));
}

function renderGpus(gpus) {
  const cards = gpus.map((g) => {
    let pill = ['idle', 'idle'];
    if (!g.healthy) pill = ['sick', 'unhealthy'];
    else if (g.paused) pill = ['paused', 'paused'];
    else if (g.holders.length) pill = ['busy', 'in use'];
    const memFrac = g.memory_total ? g.memory_used / g.memory_total : 0;
    const tele = [];
    if (g.power !== null) tele.push(Math.round(g.power) + ' W' + (g.power_limit ? ' / ' + Math.round(g.power_limit) + ' W' : ''));
    if (g.temp !== null) tele.push(g.temp + ' °C');
    if (g.mem_util !== null) tele.push('mem bw ' + g.mem_util + '%');
    return el('div', { class: 'gpu' + (g.paused ? ' paused' : '') + (g.healthy ? '' : ' sick'), 'data-gpu': g.index },
      el('div', { class: 'head' }, el('span', { class: 'idx', text: 'GPU ' + g.index }),
        el('span', { class: 'name', text: g.name, title: g.uuid }), el('span', { class: 'pill ' + pill[0], text: pill[1] })),
      g.logical ? el('div', { class: 'tele', text: 'declared GPU: no telemetry' }) : [
        meter('util', (g.util || 0) / 100, g.util === null ? 'n/a' : g.util + '%', 'util'),
        meter('mem', memFrac, fmtBytes(g.memory_used) + ' / ' + fmtBytes(g.memory_total), 'mem'),
        el('div', { class: 'tele', text: tele.join(' · ') || (g.error || '') })],
      el('ul', { class: 'holders' }, g.holders.length ? g.holders.map(holderItem) : el('li', { class: 'free', text: 'free' })));
  });
  $('gpus').replaceChildren(...cards);
  const held = gpus.filter((g) => g.holders.length).length;
  $('gpu-note').textContent = `${held} of ${gpus.length} in use`;
}

function mayAct(row) { return viewer && (viewer.admin || viewer.uid === row.uid); }

async function act(kind, row) {
  const r = await fetch(`/api/jobs/${row.id}/${kind}`, { method: 'POST', headers: authHeaders(), cache: 'no-store' });
  let body = {}; try { body = await r.json(); } catch (e) { /* empty */ }
  if (r.ok) toast(`${kind}: job ${row.id} (${row.name})`);
  else toast(`${kind} refused: ${(body.error && body.error.message) || r.status}`, true);
}

function rowTime(r) {
  if (r.state === 'PENDING') return 'waiting ' + fmtDur(state.now - r.submit_time);
  return fmtDur(r.time);
}

function renderQueue(q) {
  let rows = q.rows.concat(q.recent.filter((r) => !q.rows.some((x) => x.id === r.id)));
  if (filter === 'RUNNING') rows = rows.filter((r) => r.state === 'RUNNING' || r.state === 'COMPLETING');
  else if (filter === 'PENDING') rows = rows.filter((r) => r.state === 'PENDING');
  else if (filter === 'done') rows = rows.filter((r) => FINISHED.has(r.state));
  else if (filter === 'mine') rows = rows.filter((r) => viewer && r.uid === viewer.uid);
  const trs = rows.map((r) => {
    const held = r.state === 'PENDING' && r.reason === 'Held';
    const where = r.state === 'PENDING' ? (r.reason_detail || r.reason || '') :
      FINISHED.has(r.state) ? (r.exit_code !== null && r.exit_code !== undefined ? 'exit ' + r.exit_code : '') :
        (r.nodelist.length ? 'GPU ' + r.nodelist.join(',') : '');
    const acts = [];
    if (mayAct(r) && !FINISHED.has(r.state)) {
      if (r.state === 'PENDING') acts.push(held ? el('button', { type: 'button', 'data-act': 'release', text: 'release', onclick: (e) => { e.stopPropagation(); act('release', r); } })
        : el('button', { type: 'button', 'data-act': 'hold', text: 'hold', onclick: (e) => { e.stopPropagation(); act('hold', r); } }));
      acts.push(el('button', { type: 'button', class: 'danger', 'data-act': 'cancel', text: 'cancel', onclick: (e) => { e.stopPropagation(); act('cancel', r); } }));
    }
    return el('tr', { 'data-job': r.id, 'data-state': r.state, class: (FINISHED.has(r.state) ? 'done' : '') + (r.id === selected ? ' sel' : ''), onclick: () => select(r.id) },
      el('td', { text: String(r.id) }), el('td', { text: r.name }), el('td', { text: r.user }),
      el('td', {}, el('span', { class: 'pill ' + (held ? 'held' : r.state), text: held ? 'HELD' : r.state })),
      el('td', { class: 'num', text: fmtGpus(r.gpus) }), el('td', { class: 'num', text: rowTime(r) }),
      el('td', { class: 'why', text: where, title: where }), el('td', { class: 'act' }, acts));
  });
  if (q.total > q.rows.length && filter !== 'done') trs.push(el('tr', { class: 'more' }, el('td', { colspan: 8, text: `… and ${q.total - q.rows.length} more (berth queue lists them all)` })));
  if (!trs.length) trs.push(el('tr', { class: 'more' }, el('td', { colspan: 8, text: 'no jobs' })));
  $('queue').replaceChildren(...trs);
  $('queue-note').textContent = `${q.total} unfinished`;
}

function renderUsers(users) {
  const max = Math.max(1, ...users.map((u) => u.gpus));
  const trs = users.map((u) => el('tr', {},
    el('td', { text: u.user }),
    el('td', { class: 'gpus' }, el('div', { class: 'held' }, el('div', { class: 'bar users' }, el('i', { style: `width:${(100 * u.gpus / max).toFixed(1)}%` })),
      el('span', { text: String(+u.gpus.toFixed(2)) }))),
    el('td', { class: 'num', text: String(u.running) }), el('td', { class: 'num', text: String(u.pending) }),
    el('td', { class: 'num', text: u.gpu_hours.toFixed(2) })));
  $('users').replaceChildren(...(trs.length ? trs : [el('tr', { class: 'more' }, el('td', { colspan: 5, text: 'nobody holds a GPU' }))]));
}

// -- the log panel ------------------------------------------------------------------------

function select(id) {
  selected = id;
  document.querySelectorAll('#queue tr').forEach((tr) => tr.classList.toggle('sel', tr.dataset.job === String(id)));
  followLog(id);
}

function logHint(text) { const p = $('log'); p.className = 'logtext hint'; p.textContent = text; }

async function followLog(id) {
  clearTimeout(logTimer);
  logOffset = null;
  $('log-title').textContent = `job ${id}`;
  if (!token) { logHint(`Sign in as the job's owner to read job ${id}'s output.`); return; }
  logHint('loading…');
  pollLog(id);
}

async function pollLog(id) {
  if (id !== selected) return;
  let finished = false;
  try {
    const q = `stream=${logStream}` + (logOffset === null ? '' : `&offset=${logOffset}`);
    const r = await fetch(`/api/jobs/${id}/log?${q}`, { headers: authHeaders(), cache: 'no-store' });
    const body = await r.json();
    if (id !== selected) return;
    if (!r.ok) { logHint((body.error && body.error.message) || 'cannot read this log'); return; }
    const p = $('log');
    const atEnd = p.scrollTop + p.clientHeight >= p.scrollHeight - 4;
    if (logOffset === null || body.reset) { p.className = 'logtext'; p.textContent = body.text || (body.missing ? '(no output yet)' : ''); }
    else if (body.text) { if (p.classList.contains('hint')) { p.className = 'logtext'; p.textContent = ''; } p.append(body.text); }
    if (p.textContent.length > 400000) p.textContent = p.textContent.slice(-300000);
    if (atEnd || logOffset === null) p.scrollTop = p.scrollHeight;
    logOffset = body.offset;
    $('log-title').textContent = `job ${id} · ${body.path || 'no file'} · ${body.state}`;
    finished = FINISHED.has(body.state) && !body.text;
  } catch (e) { /* retry below */ }
  if (!finished) logTimer = setTimeout(() => pollLog(id), 1000);
}

// -- charts (canvas, drawn by hand) -------------------------------------------------------

function setupCanvas(cv) {
  const dpr = window.devicePixelRatio || 1;
  const w = cv.clientWidth, h = cv.clientHeight || 170;
  if (cv.width !== Math.round(w * dpr)) { cv.width = Math.round(w * dpr); cv.height = Math.round(h * dpr); }
  const g = cv.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  return { g, w, h };
}

function frame(g, w, h, t0, t1, ymax, yfmt) {
  const L = 40, R = 8, T = 8, B = 20;
  g.font = '11px system-ui, sans-serif'; g.fillStyle = '#8b949e'; g.strokeStyle = '#21262d'; g.lineWidth = 1;
  for (let k = 0; k <= 4; k++) {
    const y = T + (h - T - B) * (1 - k / 4);
    g.beginPath(); g.moveTo(L, Math.round(y) + 0.5); g.lineTo(w - R, Math.round(y) + 0.5); g.stroke();
    g.textAlign = 'right'; g.fillText(yfmt(ymax * k / 4), L - 6, y + 4);
  }
  g.textAlign = 'center';
  const n = Math.max(2, Math.floor((w - L - R) / 90));
  for (let k = 0; k <= n; k++) {
    const t = t0 + (t1 - t0) * k / n;
    g.textAlign = k === 0 ? 'left' : k === n ? 'right' : 'center';
    g.fillText(clock(t, t1 - t0 < 900), L + (w - L - R) * k / n, h - 5);
  }
  return { x: (t) => L + (w - L - R) * (t - t0) / Math.max(1, t1 - t0), y: (v) => T + (h - T - B) * (1 - v / ymax), L, R, T, B };
}

function drawLine(g, pts, f, pick, color, width, fill) {
  g.beginPath(); let started = false, first = null, last = null;
  for (const p of pts) {
    const v = pick(p); if (v === null || v === undefined) continue;
    const x = f.x(p[0]), y = f.y(v);
    if (!started) { g.moveTo(x, y); started = true; first = x; } else g.lineTo(x, y);
    last = x;
  }
  if (!started) return;
  g.strokeStyle = color; g.lineWidth = width; g.lineJoin = 'round'; g.stroke();
  if (fill) { g.lineTo(last, f.y(0)); g.lineTo(first, f.y(0)); g.closePath(); g.fillStyle = fill; g.fill(); }
}

function drawCharts() {
  if (!hist) return;
  const pts = hist.points;
  const now = Date.now() / 1000;
  const t0 = pts.length ? Math.min(pts[0][0], now - 120) : now - 120;
  const span = fmtDur(now - t0);
  $('util-span').textContent = 'last ' + span; $('queue-span').textContent = 'last ' + span;
  let c = setupCanvas($('util-chart'));
  let f = frame(c.g, c.w, c.h, t0, now, 100, (v) => v.toFixed(0) + '%');
  hist.gpus.forEach((gpu, k) => drawLine(c.g, pts, f, (p) => p[4][k], GPU_COLORS[k % GPU_COLORS.length] + '88', 1));
  drawLine(c.g, pts, f, (p) => p[1], '#e6edf3', 2, 'rgba(88,166,255,0.10)');
  $('util-legend').replaceChildren(el('span', {}, el('i', { class: 'sw', style: 'background:#e6edf3' }), 'mean'),
    ...hist.gpus.map((gpu, k) => el('span', {}, el('i', { class: 'sw', style: 'background:' + GPU_COLORS[k % GPU_COLORS.length] }), 'GPU ' + gpu)));
  c = setupCanvas($('queue-chart'));
  const top = Math.max(4, ...pts.map((p) => p[2] + p[3]));
  const ymax = Math.ceil(top / 4) * 4;
  f = frame(c.g, c.w, c.h, t0, now, ymax, (v) => String(Math.round(v)));
  drawLine(c.g, pts, f, (p) => p[2] + p[3], '#d29922', 1.5, 'rgba(210,153,34,0.25)');
  drawLine(c.g, pts, f, (p) => p[2], '#3fb950', 1.5, 'rgba(63,185,80,0.35)');
}

// -- start --------------------------------------------------------------------------------

// `berth web-token` prints a link whose fragment (never sent to the server) holds the token.
function tokenFromLink() {
  const m = location.hash.match(/token=([A-Za-z0-9.]+)/);
  if (!m) return false;
  history.replaceState(null, '', location.pathname);
  if (m[1] !== token) { setToken(m[1]); whoami(); }
  return true;
}

function init() {
  const m = location.hash.match(/token=([A-Za-z0-9.]+)/);
  if (m) { token = m[1]; sessionStorage.setItem(TOKEN_KEY, token); history.replaceState(null, '', location.pathname); }
  window.addEventListener('hashchange', tokenFromLink);
  bindSignIn();
  $('filters').addEventListener('click', (e) => {
    const b = e.target.closest('button'); if (!b) return;
    filter = b.dataset.f;
    for (const x of $('filters').children) x.classList.toggle('on', x === b);
    if (state) renderQueue(state.queue);
  });
  $('log-streams').addEventListener('click', (e) => {
    const b = e.target.closest('button'); if (!b) return;
    logStream = b.dataset.s;
    for (const x of $('log-streams').children) x.classList.toggle('on', x === b);
    if (selected !== null) followLog(selected);
  });
  window.addEventListener('resize', drawCharts);
  setInterval(drawCharts, 15000);
  logHint('Click a job (in the queue or on a GPU) to follow its output.');
  renderWho(); whoami(); loadHistory(); stream();
}

document.addEventListener('DOMContentLoaded', init);
