// berth dashboard: drawing the state into the page. Rows and cards are kept by key and
// replaced only when what they show changed, so focus, selection and scroll survive a live
// update. Every value from the daemon goes in as text (textContent), never as HTML.
'use strict';

const FINISHED = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'LOST', 'PREEMPTED']);

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
function jobLabel(r) { return r.array_job !== null && r.array_job !== undefined ? `${r.array_job}_${r.array_task}` : String(r.id); }

// The daemon's start estimate in words (as `berth queue --start` and `berth show` say it:
// berth/cli/queue_starts.py): "<=" by time limits, "~" by learned run times.
function startText(est, now) {
  if (!est) return 'unknown';
  const after = est.after || [];
  let head = after.length ? 'after job ' + after.join(', ') + ', ' : '';
  if (est.start === null || est.start === undefined) {
    const note = est.note || '';
    if (est.begin) head += 'not before ' + clock(est.begin) + ', ';
    return head + (note.startsWith('unknown') || !note ? note : 'never (' + note + ')');
  }
  if (est.start <= now + 1) return 'now';
  if (est.begin && est.start <= est.begin + 1) return head + 'not before ' + clock(est.begin) + ' (in ' + fmtDur(est.begin - now) + ')';
  if (est.exact !== false) return head + 'in <= ' + fmtDur(est.start - now) + ' (at ' + clock(est.start) + ')';
  const late = est.latest && est.latest > est.start + 1 ? ', p90 ' + fmtDur(est.latest - now) : '';
  return head + 'in ~' + fmtDur(est.start - now) + ' (at ' + clock(est.start) + late + ')';
}

// How good the last week's start estimates were (berth/daemon/engine/accuracy.py).
function accuracyText(a) {
  if (!a || !a.jobs) return '';
  const n = a.jobs - a.unknown;
  if (!n) return ` · start estimates, last ${a.days} days: ${a.unknown} unknown`;
  return ` · start estimates, last ${a.days} days: off by ${fmtDur(a.median)} (median), ${fmtDur(a.p90)} (p90)` +
    `, ${Math.round(100 * a.within)}% by their bound, over ${n} job${n === 1 ? '' : 's'}` + (a.unknown ? `, ${a.unknown} unknown` : '');
}

// Keep focus where it was: a focusable element carries data-key; one replaced by an equal
// key's new element gets the focus back. One that is gone (an action done: "hold" became
// "release", a finished row has no action) leaves it on its row's control in the same place,
// or on the row; a row gone, on the next row (or the one before).
function focusPlan(a) {
  if (!a || !a.dataset || !a.dataset.key) return null;
  const tr = a.closest ? a.closest('tr[data-key]') : null;
  const near = (n) => (n && n.dataset && n.dataset.key ? n.dataset.key : null);
  return { key: a.dataset.key, row: tr ? tr.dataset.key : null,
    slot: tr && a !== tr ? [...tr.querySelectorAll('td.act button')].indexOf(a) : -1,
    next: tr ? near(tr.nextElementSibling) : null, prev: tr ? near(tr.previousElementSibling) : null };
}

function refocus(plan) {
  if (!plan) return;
  const find = (k) => (k ? document.querySelector(`[data-key="${CSS.escape(k)}"]`) : null);
  let b = find(plan.key);
  if (!b && plan.row) {
    const tr = find(plan.row);
    if (tr) {
      const acts = tr.querySelectorAll('td.act button:not([disabled])');
      b = plan.slot >= 0 && acts.length ? acts[Math.min(plan.slot, acts.length - 1)] : tr;
    } else b = find(plan.next) || find(plan.prev) || document.querySelector('.scroll');
  }
  if (b) b.focus({ preventScroll: true });
}

function keepFocus(fn) {
  const a = document.activeElement, plan = focusPlan(a);
  const sc = document.querySelector('.scroll'), top = sc ? sc.scrollTop : 0;
  fn();
  if (sc && sc.scrollTop !== top) sc.scrollTop = top;
  if (plan && (!a.isConnected || document.activeElement !== a)) refocus(plan);
}

// Put `items` ([key, signature, make()]) into `parent` in order, reusing unchanged nodes.
function reconcile(parent, items) {
  const old = new Map();
  for (const n of parent.children) if (n.dataset.rk) old.set(n.dataset.rk, n);
  const nodes = items.map(([key, sig, make]) => {
    const n = old.get(key);
    if (n && n.dataset.sig === sig) { old.delete(key); return n; }
    const m = make(); m.dataset.rk = key; m.dataset.sig = sig;
    return m;
  });
  for (const n of old.values()) n.remove();
  for (const n of [...parent.children]) if (!n.dataset.rk) n.remove();
  nodes.forEach((n, k) => { if (parent.children[k] !== n) parent.insertBefore(n, parent.children[k] || null); });
}

function render() {
  const s = state;
  const c = s.queue.counts;
  const running = (c.RUNNING || 0) + (c.COMPLETING || 0);
  const lost = s.gpus.filter((g) => !g.healthy);
  $('summary').replaceChildren(
    el('b', { text: s.host }), ' · ', el('b', { text: String(s.gpus.length) }), ' GPUs',
    lost.length ? el('strong', { class: 'lost', text: ` (${lost.length} lost: GPU ${lost.map((g) => g.index).join(', ')})` }) : '',
    ' · ', el('b', { text: String(running) }), ' running · ', el('b', { text: String(c.PENDING || 0) }), ' waiting',
    c.HELD ? ` (${c.HELD} held)` : '', ' · policy ', s.daemon.policy);
  const warn = [];
  if (s.daemon.queue_paused) warn.push('The queue is paused after an unclean stop: nothing starts until `berth resume --all`.');
  if (s.daemon.gpu_error) warn.push('Cannot read the GPUs: ' + s.daemon.gpu_error);
  for (const g of lost) warn.push(`GPU ${g.index} is lost${g.error ? ' (' + g.error + ')' : ''}: nothing starts on it.`);
  showBanner(warn.join(' '));
  keepFocus(() => { renderGpus(s.gpus); renderQueue(s.queue); renderUsers(s.users); renderProjects(s.projects || []); });
}

function meter(label, frac, text, kind) {
  const pct = Math.max(0, Math.min(100, (frac || 0) * 100));
  let cls = 'bar ' + kind;
  if (kind === 'util') cls += pct >= 90 ? ' hot' : pct >= 60 ? ' warm' : '';
  return el('div', { class: 'meter' }, el('span', { class: 'lbl', text: label }),
    el('div', { class: cls, role: 'img', 'aria-label': label + ' ' + text }, el('i', { style: `width:${pct.toFixed(1)}%` })),
    el('span', { class: 'val', text }));
}

function jobLink(id, text, where, label) {
  return el('button', { type: 'button', class: 'link what', 'data-key': `${where}-job-${id}`, title: text, text,
    onclick: () => select(id, label) });
}

function holderItem(h, g) {
  const share = h.share < 1 ? ` (${h.share} of it)` : '';
  if (h.kind === 'job') {
    const use = [h.mem ? fmtBytes(h.mem) : null, h.util !== null && h.util !== undefined ? h.util + '%' : null].filter(Boolean).join(' · ');
    return el('li', {}, el('span', { class: 'tag job', text: 'job' }),
      jobLink(h.id, `${h.label || h.id} ${h.name}${share}`, 'gpu' + g.index, h.label || String(h.id)),
      el('span', { class: 'user', text: h.user }), use ? el('span', { class: 'use', text: use }) : null);
  }
  if (h.kind === 'outside') {
    if (h.label) return el('li', {}, el('span', { class: 'tag outside', text: 'other' }), el('span', { class: 'what', text: h.label }));
    const what = (h.command || 'pid ' + h.pid);
    return el('li', { title: `pid ${h.pid}: ${h.command || '(command hidden)'}` }, el('span', { class: 'tag outside', text: 'other' }),
      el('span', { class: 'user', text: h.user || '?' }), el('span', { class: 'pid', text: 'pid ' + h.pid }),
      el('span', { class: 'what', tabindex: 0, title: what, text: what }), el('span', { class: 'use', text: fmtBytes(h.mem) }));
  }
  return el('li', { title: h.command || '' }, el('span', { class: 'tag ' + h.kind, text: h.kind === 'claim' ? 'run' : 'wait' }),
    el('span', { class: 'user', text: h.user }),
    el('span', { class: 'what', text: (h.command || (h.pid ? 'pid ' + h.pid : '')) + share }));
}

function gpuCard(g) {
  let pill = ['idle', 'idle'];
  if (!g.healthy) pill = ['sick', 'lost'];
  else if (g.paused) pill = ['paused', 'drained'];
  else if (g.holders.length) pill = ['busy', 'in use'];
  const memFrac = g.memory_total ? g.memory_used / g.memory_total : 0;
  const tele = [];
  if (g.power !== null) tele.push(Math.round(g.power) + ' W' + (g.power_limit ? ' / ' + Math.round(g.power_limit) + ' W' : ''));
  if (g.temp !== null) tele.push(g.temp + ' °C');
  if (g.mem_util !== null) tele.push('mem bw ' + g.mem_util + '%');
  const items = g.holders.map((h) => holderItem(h, g));
  if (g.free_share) items.push(el('li', { class: 'free', text: `${g.free_share} of it free` }));
  return el('div', { class: 'gpu' + (g.paused ? ' paused' : '') + (g.healthy ? '' : ' sick'), 'data-gpu': g.index },
    el('div', { class: 'head' }, el('h3', { class: 'idx', text: 'GPU ' + g.index }),
      el('span', { class: 'name', text: g.name, title: g.uuid }), el('span', { class: 'pill ' + pill[0], text: pill[1] })),
    g.paused ? el('div', { class: 'note', text: g.pause_note || 'paused' }) : null,
    (g.reserved || []).map((r) => el('div', { class: 'note reserved', text: reservedText(r, state.now) })),
    !g.healthy ? el('div', { class: 'note bad', text: 'lost: ' + (g.error || 'NVML cannot read it') }) : null,
    g.logical ? el('div', { class: 'tele', text: 'declared GPU: no telemetry' }) : [
      meter('util', (g.util || 0) / 100, g.util === null ? 'n/a' : g.util + '%', 'util'),
      meter('mem', memFrac, fmtBytes(g.memory_used) + ' / ' + fmtBytes(g.memory_total), 'mem'),
      el('div', { class: 'tele', text: tele.join(' · ') })],
    el('ul', { class: 'holders' }, items.length ? items : el('li', { class: 'free', text: 'free' })));
}

// An admin reservation on a GPU's card (as `berth status` says it).
function reservedText(r, now) {
  const far = (t) => (t - now > 86400 ? ' (in ' + fmtDur(t - now) + ')' : '');
  const when = r.open ? 'until ' + clock(r.end) + far(r.end)
    : 'from ' + clock(r.start) + far(r.start) + ' for ' + fmtDur(r.end - r.start);
  return `reserved for ${r.holders} ${when} (reservation ${r.id})` + (r.note ? ': ' + r.note : '');
}

function renderGpus(gpus) {
  reconcile($('gpus'), gpus.map((g) => [String(g.index), JSON.stringify(g), () => gpuCard(g)]));
  const held = gpus.filter((g) => g.holders.length).length;
  $('gpu-note').textContent = `${held} of ${gpus.length} in use`;
}

function mayAct(row) { return viewer && (viewer.admin || viewer.uid === row.uid); }

function rowTime(r) {
  if (r.state === 'PENDING') return 'waiting ' + fmtDur(state.now - r.submit_time);
  return fmtDur(r.time);
}

function actButton(kind, r, danger) {
  return el('button', { type: 'button', class: danger ? 'danger' : null, 'data-act': kind, 'data-key': `act-${kind}-${r.id}`,
    'aria-label': `${kind} job ${jobLabel(r)}`, text: kind, disabled: offline ? '' : null,
    onclick: (e) => { e.stopPropagation(); ask(kind, r); } });
}

function queueRow(r) {
  const held = r.state === 'PENDING' && r.reason === 'Held';
  const why = r.state === 'PENDING' ? (r.reason_detail || r.reason || '') :
    FINISHED.has(r.state) ? (r.exit_code !== null && r.exit_code !== undefined ? 'exit ' + r.exit_code : '') :
      (r.nodelist.length ? 'GPU ' + r.nodelist.join(',') : '');
  const starts = r.state === 'PENDING' ? startText(r.start_estimate, state.now) : '';
  const acts = [];
  if (mayAct(r) && !FINISHED.has(r.state)) {
    if (r.state === 'PENDING') acts.push(actButton(held ? 'release' : 'hold', r));
    acts.push(actButton('cancel', r, true));
  }
  const label = jobLabel(r);
  const tr = el('tr', { 'data-job': r.id, 'data-state': r.state, 'data-key': 'row-' + r.id, tabindex: 0,
    'aria-label': `job ${label} ${r.name}, ${held ? 'held' : r.state.toLowerCase()}; Enter shows its log`,
    class: (FINISHED.has(r.state) ? 'done' : '') + (r.id === selected ? ' sel' : ''), 'aria-selected': r.id === selected ? 'true' : 'false',
    onclick: () => select(r.id, label), onkeydown: (e) => { if ((e.key === 'Enter' || e.key === ' ') && e.target === tr) { e.preventDefault(); select(r.id, label); } } },
  el('td', { class: 'id', 'data-label': 'Job', text: label }),
  el('td', { class: 'name', 'data-label': 'Name', title: r.name }, el('span', { class: 'cut', text: r.name })),
  el('td', { class: 'user', 'data-label': 'User', text: r.user }),
  el('td', { class: 'state', 'data-label': 'State' }, el('span', { class: 'pill ' + (held ? 'held' : r.state), text: held ? 'HELD' : r.state })),
  el('td', { class: 'num ngpus', 'data-label': 'GPUs', text: fmtGpus(r.gpus) }), el('td', { class: 'num time', 'data-label': 'Time', text: rowTime(r) }),
  el('td', { class: 'why', 'data-label': r.state === 'PENDING' ? 'Waits for' : 'On', text: why }),
  el('td', { class: 'starts', 'data-label': 'Starts', text: starts,
    title: r.state === 'PENDING' && r.start_estimate && r.start_estimate.runtime ? 'runs: ' + r.start_estimate.runtime.text : '' }),
  el('td', { class: 'act' }, acts));
  return tr;
}

function renderQueue(q) {
  let rows = q.rows.concat(q.recent.filter((r) => !q.rows.some((x) => x.id === r.id)));
  if (filter === 'RUNNING') rows = rows.filter((r) => r.state === 'RUNNING' || r.state === 'COMPLETING');
  else if (filter === 'PENDING') rows = rows.filter((r) => r.state === 'PENDING');
  else if (filter === 'done') rows = rows.filter((r) => FINISHED.has(r.state));
  else if (filter === 'mine') rows = rows.filter((r) => viewer && r.uid === viewer.uid);
  const who = viewer ? viewer.uid + (viewer.admin ? 'a' : '') : '-';
  const items = rows.map((r) => [String(r.id), JSON.stringify([{ ...r, time: null }, r.id === selected, who, offline]), () => queueRow(r)]);
  if (q.total > q.rows.length && filter !== 'done') items.push(['more', String(q.total), () => el('tr', { class: 'more' }, el('td', { colspan: 9, text: `… and ${q.total - q.rows.length} more (berth queue lists them all)` }))]);
  if (!items.length) items.push(['none', '', () => el('tr', { class: 'more' }, el('td', { colspan: 9, text: 'no jobs' }))]);
  reconcile($('queue'), items);
  for (const r of rows) {  // what ticks with the clock, changed in place
    const tr = $('queue').querySelector(`tr[data-rk="${r.id}"]`);
    if (!tr) continue;
    const t = rowTime(r), s = r.state === 'PENDING' ? startText(r.start_estimate, state.now) : '';
    const tc = tr.querySelector('td.time'), sc = tr.querySelector('td.starts');
    if (tc.textContent !== t) tc.textContent = t;
    if (sc.textContent !== s) sc.textContent = s;
  }
  $('queue-note').textContent = `${q.total} unfinished` + accuracyText(q.estimates);
}

function renderProjects(projects) {
  // one line per project: GPUs held (of its max_gpus), running, waiting, decayed usage
  $('projects-table').hidden = !projects.length;
  $('projects').replaceChildren(...projects.map((p) => el('tr', {},
    el('td', { text: p.project }),
    el('td', { text: String(+p.gpus.toFixed(2)) + (p.max_gpus == null ? '' : ` of ${p.max_gpus}`) }),
    el('td', { class: 'num', text: String(p.running) }), el('td', { class: 'num', text: String(p.pending) }),
    el('td', { class: 'num', text: p.usage_gpu_hours.toFixed(2) }))));
}

function renderUsers(users) {
  const max = Math.max(1, ...users.map((u) => u.gpus));
  const trs = users.map((u) => el('tr', {},
    el('td', { text: u.user }),
    el('td', { class: 'gpus' }, el('div', { class: 'held' }, el('div', { class: 'bar users', role: 'img', 'aria-label': `${u.user} holds ${+u.gpus.toFixed(2)} GPUs` },
      el('i', { style: `width:${(100 * u.gpus / max).toFixed(1)}%` })), el('span', { text: String(+u.gpus.toFixed(2)) }))),
    el('td', { class: 'num', text: String(u.running) }), el('td', { class: 'num', text: String(u.pending) }),
    el('td', { class: 'num', text: u.gpu_hours.toFixed(2) })));
  $('users').replaceChildren(...(trs.length ? trs : [el('tr', { class: 'more' }, el('td', { colspan: 5, text: 'nobody holds a GPU' }))]));
}
