// berth dashboard: the state, live updates, signing in, acting, the log and the charts (render.js
// draws the state). Plain scripts, no build step, no library. Every value from the daemon goes
// into the page as text (textContent), never as HTML.
'use strict';

const $ = (id) => document.getElementById(id);
const TOKEN_KEY = 'berth.token';
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
let selectedLabel = null; // ... as the CLI names it (9_1: task 1 of array 9)
let logStream = 'out';
let logOffset = null;
let logTimer = null;
let streamAbort = null;
let offline = true;       // no live stream: the page shows the state as of its last update

function authHeaders() { return token ? { Authorization: 'Bearer ' + token } : {}; }

function toast(msg, bad) {  // (#toast is a live region: what it says is read out)
  const t = $('toast');
  t.textContent = msg; t.className = 'toast show' + (bad ? ' bad' : '');
  clearTimeout(toast.timer); toast.timer = setTimeout(() => { t.className = 'toast'; t.textContent = ''; }, bad ? 8000 : 4000);
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
  if (!$('panel-usage').hidden) loadUsage();  // (usage.js: the rows this viewer may see)
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
  const had = document.activeElement;
  $('signin-btn').hidden = !!viewer;
  $('signout-btn').hidden = !viewer;
  // The button just used is hidden: focus goes to the one shown in its place, not to <body>.
  if ((had === $('signin-btn') || had === $('signout-btn')) && had.hidden) (viewer ? $('signout-btn') : $('signin-btn')).focus();
}

function bindSignIn() {
  const dlg = $('signin');
  $('signin-btn').addEventListener('click', () => { $('signin-err').textContent = ''; $('token-input').value = ''; dlg.showModal(); });
  // Closed, a dialog gives the focus back to what opened it; gone meanwhile (a live update
  // replaced it), to its row or the next control (render.js's refocus).
  $('confirm').addEventListener('close', () => { if (document.activeElement === document.body) refocus(confirmFrom); });
  $('signin-cancel').addEventListener('click', () => dlg.close());
  $('confirm-no').addEventListener('click', () => $('confirm').close());
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
  const was = offline;
  offline = !on;
  $('live').className = 'live' + (on ? ' on' : '');
  const asOf = !on && state ? ' · as of ' + clock(state.received) : '';
  $('live-text').textContent = (text || (on ? 'live' : 'offline')) + asOf;
  document.body.classList.toggle('stale', !on && !!state);
  if (was !== offline && state) render();  // (actions enabled or disabled)
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
    if (!streamAbort.signal.aborted) setLive(false);  // (a new token restarts it: still live)
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

// -- acting (render.js draws the page) ------------------------------------------------------

// Cancelling a running job asks first (its work so far is lost); the rest act at once.
let confirmFrom = null;  // where the focus was when the question opened
function ask(kind, row) {
  if (offline) { toast(`${kind}: the daemon does not answer (as of ${clock(state.received)}): try again when the page is live`, true); return; }
  if (kind !== 'cancel' || row.state === 'PENDING') { act(kind, row); return; }
  const dlg = $('confirm');
  confirmFrom = focusPlan(document.activeElement);
  $('confirm-text').textContent = `Cancel job ${jobLabel(row)} (${row.name})? It is ${row.state.toLowerCase()}: it is stopped and its work so far is lost.`;
  $('confirm-ok').onclick = () => { dlg.close(); act(kind, row); };
  dlg.showModal();
  $('confirm-no').focus();
}

async function act(kind, row) {
  let r;
  try {
    r = await fetch(`/api/jobs/${row.id}/${kind}`, { method: 'POST', headers: authHeaders(), cache: 'no-store' });
  } catch (e) {
    toast(`${kind} failed: the daemon does not answer (job ${jobLabel(row)} is unchanged as far as the page knows)`, true);
    return;
  }
  let body = {}; try { body = await r.json(); } catch (e) { /* empty */ }
  if (r.ok) toast(`${kind}: job ${jobLabel(row)} (${row.name})`);
  else toast(`${kind} refused: ${(body.error && body.error.message) || r.status}`, true);
}

// -- the log panel ------------------------------------------------------------------------

function select(id, label) {
  selected = id; selectedLabel = label || String(id);
  document.querySelectorAll('#queue tr[data-job]').forEach((tr) => {
    const on = tr.dataset.job === String(id);
    tr.classList.toggle('sel', on); tr.setAttribute('aria-selected', String(on));
  });
  followLog(id);
}

function logHint(text) { const p = $('log'); p.className = 'logtext hint'; p.textContent = text; }

async function followLog(id) {
  clearTimeout(logTimer);
  logOffset = null;
  $('log-title').textContent = `job ${selectedLabel}`;
  if (!token) { logHint(`Sign in as the job's owner to read job ${selectedLabel}'s output.`); return; }
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
    $('log-title').textContent = `job ${selectedLabel} · ${body.path || 'no file'} · ${body.state}`;
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

function frame(g, w, h, t0, t1, ymax, yfmt, xfmt) {  // (xfmt: the time axis' labels; default a clock)
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
    g.fillText(xfmt ? xfmt(t) : clock(t, t1 - t0 < 900), L + (w - L - R) * k / n, h - 5);
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
  describeCharts(pts, span);
}

// The charts in words, for those who cannot see them.
function describeCharts(pts, span) {
  const last = pts.length ? pts[pts.length - 1] : null;
  const vals = pts.map((p) => p[1]).filter((v) => v !== null && v !== undefined);
  const mean = vals.length ? vals.reduce((a, b) => a + b, 0) / vals.length : null;
  $('util-chart').setAttribute('aria-label', last === null ? 'GPU utilisation: no samples yet' :
    `Mean GPU utilisation over the last ${span}: ${Math.round(last[1] || 0)}% now, ${Math.round(mean || 0)}% on average, highest ${Math.round(Math.max(0, ...vals))}%`);
  $('queue-chart').setAttribute('aria-label', last === null ? 'Queue length: no samples yet' :
    `Queue length over the last ${span}: ${last[2]} running and ${last[3]} waiting now, at most ${Math.max(0, ...pts.map((p) => p[2] + p[3]))} jobs`);
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
    for (const x of $('filters').children) { x.classList.toggle('on', x === b); x.setAttribute('aria-pressed', String(x === b)); }
    if (state) renderQueue(state.queue);
  });
  $('log-streams').addEventListener('click', (e) => {
    const b = e.target.closest('button'); if (!b) return;
    logStream = b.dataset.s;
    for (const x of $('log-streams').children) { x.classList.toggle('on', x === b); x.setAttribute('aria-pressed', String(x === b)); }
    if (selected !== null) followLog(selected);
  });
  window.addEventListener('resize', drawCharts);
  setInterval(drawCharts, 15000);
  logHint('Click a job (in the queue or on a GPU) to follow its output.');
  renderWho(); whoami(); loadHistory(); stream();
}

document.addEventListener('DOMContentLoaded', init);
