/**
 * The page's own script (runs in the browser): draws the lanes from the embedded data on one zoomable time axis,
 * plays audio, and follows a live session's tail. Written as plain browser JavaScript (no template literals).
 */
export const PAGE_SCRIPT = String.raw`
"use strict";
const data = JSON.parse(document.getElementById("timeline-data").textContent);
let t = data.timeline;
const LEFT = data.layout.left;
const RIGHT = data.layout.right;
const lanesEl = document.getElementById("lanes");
const detail = document.getElementById("detail");
const el = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
// The nonce this script runs under (the page's Content-Security-Policy): wavesurfer.js puts it on the <style> it writes.
const nonce = document.currentScript === null ? "" : document.currentScript.nonce;
// Client text (ids, transcripts, reasons, labels) is isolated wherever it is shown, so an unclosed bidi control in it
// cannot reverse the page's text after it: <bdi> in the DOM; in plain text (a title), FSI ... PDI. closeBidi appends
// a closer for every control the text leaves open, as src/replay/bidi-text.ts closeBidiControls does.
const CLOSER_OF = { "\u202a": "\u202c", "\u202b": "\u202c", "\u202d": "\u202c", "\u202e": "\u202c", "\u2066": "\u2069", "\u2067": "\u2069", "\u2068": "\u2069" };
const closeBidi = (text) => {
  const open = [];
  for (const c of String(text)) {
    if (c in CLOSER_OF) open.push(CLOSER_OF[c]);
    else if (c === "\u202c") { if (open[open.length - 1] === "\u202c") open.pop(); }
    else if (c === "\u2069") { const i = open.lastIndexOf("\u2069"); if (i >= 0) open.length = i; }
  }
  return String(text) + open.reverse().join("");
};
const iso = (text) => "\u2068" + closeBidi(text) + "\u2069";
const bdi = (text) => el("bdi", null, closeBidi(text));
/** A log entry's JSON for people: bidi controls written as escapes (still JSON), seen and not obeyed. */
const seenJson = (json) => json.replace(/[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g, (c) => "\\u" + c.charCodeAt(0).toString(16).padStart(4, "0"));
/** The axis's end: the session's last entry, or later where a response's audio plays on past it. */
const extentOf = (tl) => Math.max(1, tl.duration_ms, ...tl.responses.map((r) => (r.first_audio_ms === null ? 0 : r.first_audio_ms + r.audio_ms)));
let total = extentOf(t);
let view = { from: 0, to: total };

// Selecting a log entry: its JSON and revision, the mark highlighted (again after every redraw).
let selected = null;
const highlight = () => { for (const e of document.querySelectorAll("[data-rev]")) e.classList.toggle("selected", e.dataset.rev === String(selected)); };
const show = (rev) => {
  selected = rev;
  const entry = data.entries[String(rev)];
  detail.textContent = entry === undefined ? "revision " + rev + ": not in this page" : "revision " + rev + "\n" + seenJson(JSON.stringify(JSON.parse(entry), null, 2));
  highlight();
};
const select = (rev) => { history.replaceState(null, "", "#rev=" + rev); show(rev); };

// The input clock on the session's: piecewise linear between the anchors of timeline.input.clock.
const inputToSession = (ms) => {
  const c = t.input.clock;
  if (c.length === 0) return ms;
  if (ms <= c[0][0]) return c[0][1] - (c[0][0] - ms);
  for (let i = 1; i < c.length; i++) {
    if (ms <= c[i][0]) { const x0 = c[i - 1][0], y0 = c[i - 1][1], x1 = c[i][0], y1 = c[i][1]; return x1 === x0 ? y1 : y0 + ((ms - x0) * (y1 - y0)) / (x1 - x0); }
  }
  const last = c[c.length - 1];
  return last[1] + (ms - last[0]);
};
const BUCKET_MS = 1000 / data.layout.peaks_per_second;
/** [xs (s), mins, maxs] of peaks whose bucket i starts at toSession(i * BUCKET_MS); xs strictly increasing. */
const peakTable = (peaks, toSession) => {
  const xs = [], mins = [], maxs = [];
  let prev = -Infinity;
  for (let i = 0; 2 * i + 1 < peaks.length; i++) { const x = Math.max(toSession(i * BUCKET_MS) / 1000, prev + 1e-6); xs.push(x); prev = x; mins.push(peaks[2 * i]); maxs.push(peaks[2 * i + 1]); }
  return [xs, mins, maxs];
};

// The plots: uPlot, x in s of the session, every one on the view.
let charts = [];
const plotWidth = () => Math.max(300, lanesEl.clientWidth);
const yAxes = (left, right) => [{ stroke: "#555" }, Object.assign({ size: LEFT, stroke: "#555" }, left), Object.assign({ side: 1, size: RIGHT, grid: { show: false }, stroke: "#555" }, right)];
const chartOptions = (height, series, scales, axes) => ({
  width: plotWidth(), height, legend: { show: false }, series, axes,
  scales: Object.assign({ x: { time: false, auto: false, range: () => [view.from / 1000, view.to / 1000] } }, scales),
  cursor: { drag: { x: true, y: false, setScale: false }, y: false },
  hooks: { setSelect: [(u) => { if (u.select.width < 3) return; const a = u.posToVal(u.select.left, "x"), b = u.posToVal(u.select.left + u.select.width, "x"); u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false); setView(a * 1000, b * 1000); }] },
});
const wave = (color) => [0, 1].map(() => ({ scale: "y", stroke: color, fill: color + "66", fillTo: 0, width: 1, points: { show: false } }));
const drawPlots = () => {
  for (const u of charts) u.destroy();
  charts = [];
  const input = document.getElementById("input-plot");
  input.textContent = "";
  const w = peakTable(t.input.peaks, inputToSession);
  const vx = [], vy = [];
  let prev = -Infinity;
  for (const p of t.vad.points) { const x = Math.max(inputToSession(p[0]) / 1000, prev + 1e-6); prev = x; vx.push(x); vy.push(p[1]); }
  if (w[0].length + vx.length > 0) {
    const joined = uPlot.join([w, [vx, vy, vy.map(() => t.vad.threshold)]]);
    charts.push(new uPlot(chartOptions(120, [{}].concat(wave("#55aa77"), [{ scale: "vad", stroke: "#3377aa", width: 1.5, spanGaps: true, points: { show: false } }, { scale: "vad", stroke: "#cc3333", dash: [4, 4], width: 1, spanGaps: true, points: { show: false } }]), { y: { range: [-1, 1] }, vad: { range: [0, 1] } }, yAxes({ scale: "y" }, { scale: "vad" })), joined, input));
  } else input.textContent = "no input audio";
  const out = document.getElementById("responses-plot");
  out.textContent = "";
  const tables = [], series = [{}];
  for (const r of t.responses) {
    if (r.peaks.length === 0 || r.first_audio_ms === null) continue;
    tables.push(peakTable(r.peaks, (ms) => r.first_audio_ms + ms));
    series.push.apply(series, wave(r.status === "cancelled" ? "#cc7733" : r.status === null ? "#888888" : "#3377aa"));
  }
  if (tables.length > 0) charts.push(new uPlot(chartOptions(90, series, { y: { range: [-1, 1] } }, yAxes({ scale: "y" }, { scale: "y", values: (u, splits) => splits.map(() => "") })), uPlot.join(tables), out));
  else out.textContent = "no response audio";
};

// The lanes of bars and marks, positioned on the view.
const pos = (ms) => (100 * (ms - view.from)) / Math.max(1, view.to - view.from) + "%";
const bar = (lane, from, to, cls, title, text, rev) => {
  const b = el("div", "bar " + cls, text);
  b.style.left = pos(from);
  b.style.width = (100 * Math.max(to - from, (view.to - view.from) / 400)) / Math.max(1, view.to - view.from) + "%";
  b.title = title;
  if (rev !== undefined && rev !== null) { b.dataset.rev = String(rev); b.onclick = () => select(rev); }
  lane.appendChild(b);
  return b;
};
const tick = (lane, at, cls, title, rev) => {
  const k = el("div", "tick " + cls);
  k.style.left = pos(at);
  k.title = title;
  if (rev !== undefined && rev !== null) { k.dataset.rev = String(rev); k.onclick = (e) => { e.stopPropagation(); select(rev); }; }
  lane.appendChild(k);
  return k;
};
const TURN_STEPS = [["speechStoppedAt", "commit"], ["committedAt", "created"], ["responseCreatedAt", "first-audio"], ["firstAudioAt", "first-ack"], ["firstAckAt", null]];
const drawLanes = () => {
  const speech = document.getElementById("speech");
  speech.textContent = "";
  for (const s of t.speech) bar(speech, s.start_ms, s.stop_ms === null ? total : s.stop_ms, "speech", iso(s.item_id), "");
  const responses = document.getElementById("responses");
  responses.textContent = "";
  for (const r of t.responses) {
    const status = r.status === null ? "open" : r.status;
    bar(responses, r.created_ms, r.ended_ms === null ? total : r.ended_ms, status, iso(r.id) + " " + status + (r.reason ? " (" + iso(r.reason) + ")" : "") + ": " + iso(r.transcript), closeBidi(r.id.replace(/^resp_[0-9a-f]+_/, "#")), r.ended_revision === null ? r.started_revision : r.ended_revision);
    if (r.first_audio_ms === null) continue;
    const a = r.first_audio_ms;
    tick(responses, a + r.audio_ms, "generated", iso(r.id) + ": generated " + r.audio_ms + " ms");
    tick(responses, a + r.played_ms, "played", iso(r.id) + ": played " + Math.round(r.played_ms) + " ms" + (r.acks.length > 0 ? " (" + r.acks.length + " acks)" : " (the server's estimate)"));
    if (r.heard_ms !== null) tick(responses, a + r.heard_ms, "heard", iso(r.id) + ": heard " + Math.round(r.heard_ms) + " ms");
    if (r.status === "cancelled" && r.ended_ms !== null) tick(responses, r.ended_ms, "cut", iso(r.id) + ": cut (" + iso(r.reason) + ")", r.ended_revision);
  }
  const turns = document.getElementById("turns");
  turns.textContent = "";
  turns.style.height = Math.max(1, t.turns.length) * 12 + 4 + "px";
  for (const [i, turn] of t.turns.entries()) {
    for (let s = 0; s < TURN_STEPS.length - 1; s++) {
      const from = turn[TURN_STEPS[s][0]];
      if (from === null) continue;
      let to = null, j = s + 1;
      for (; j < TURN_STEPS.length && to === null; j++) to = turn[TURN_STEPS[j][0]];
      if (to === null) continue;
      const b = bar(turns, from, to, "span " + TURN_STEPS[s][1], "turn " + turn.index + ": " + TURN_STEPS[s][0] + " to " + TURN_STEPS[j - 1][0] + ", " + Math.round(to - from) + " ms", "");
      b.style.top = i * 12 + 2 + "px";
      s = j - 2;
    }
  }
  for (const [name, kinds] of Object.entries(data.lanes)) {
    const lane = document.getElementById("lane-" + name);
    lane.textContent = "";
    for (const m of t.marks) if (kinds.includes(m.kind)) tick(lane, m.at_ms, "mark " + m.kind, (m.at_ms / 1000).toFixed(2) + " s " + m.kind + ": " + iso(m.label), m.revision);
  }
  highlight();
  document.getElementById("view").textContent = (view.from / 1000).toFixed(2) + " to " + (view.to / 1000).toFixed(2) + " s of " + (total / 1000).toFixed(2);
  drawPlayhead();
};

// Zoom and pan: one view for every lane and plot.
const setView = (from, to) => {
  const width = Math.min(total, Math.max(20, to - from));
  let a = Math.max(0, Math.min(from, total - width));
  view = { from: a, to: a + width };
  for (const u of charts) u.setScale("x", { min: view.from / 1000, max: view.to / 1000 });
  drawLanes();
};
const zoom = (factor, at) => { const c = at === undefined ? (view.from + view.to) / 2 : at; setView(c - (c - view.from) * factor, c + (view.to - c) * factor); };
const pan = (fraction) => { const d = (view.to - view.from) * fraction; setView(view.from + d, view.to + d); };
const msAt = (clientX) => { const r = lanesEl.getBoundingClientRect(); const f = (clientX - r.left - LEFT) / Math.max(1, r.width - LEFT - RIGHT); return view.from + f * (view.to - view.from); };
document.getElementById("zoom-in").onclick = () => zoom(0.5);
document.getElementById("zoom-out").onclick = () => zoom(2);
document.getElementById("pan-left").onclick = () => pan(-0.25);
document.getElementById("pan-right").onclick = () => pan(0.25);
document.getElementById("zoom-reset").onclick = () => setView(0, total);
lanesEl.addEventListener("wheel", (e) => { e.preventDefault(); if (e.shiftKey || Math.abs(e.deltaX) > Math.abs(e.deltaY)) pan((e.shiftKey ? e.deltaY : e.deltaX) / 1000); else zoom(e.deltaY > 0 ? 1.25 : 0.8, msAt(e.clientX)); }, { passive: false });
lanesEl.addEventListener("dblclick", () => setView(0, total));
let dragFrom = null;
for (const lane of document.querySelectorAll(".lane")) lane.addEventListener("mousedown", (e) => { dragFrom = { x: e.clientX, view: view }; });
window.addEventListener("mouseup", () => { dragFrom = null; });
window.addEventListener("mousemove", (e) => { if (dragFrom === null) return; const perPx = (dragFrom.view.to - dragFrom.view.from) / Math.max(1, lanesEl.clientWidth - LEFT - RIGHT); const d = (dragFrom.x - e.clientX) * perPx; setView(dragFrom.view.from + d, dragFrom.view.to + d); });
document.addEventListener("keydown", (e) => { if (e.target instanceof HTMLInputElement) return; if (e.key === "ArrowLeft") pan(-0.25); else if (e.key === "ArrowRight") pan(0.25); else if (e.key === "+" || e.key === "=") zoom(0.5); else if (e.key === "-") zoom(2); else if (e.key === "0") setView(0, total); });

// The player: wavesurfer.js plays the input or a response, its waveform from the same peaks; a playhead follows on the lanes.
const playhead = document.getElementById("playhead");
let playheadMs = null;
const drawPlayhead = () => {
  const inView = playheadMs !== null && playheadMs >= view.from && playheadMs <= view.to;
  playhead.hidden = !inView;
  if (inView) playhead.style.left = LEFT + ((playheadMs - view.from) / Math.max(1, view.to - view.from)) * (lanesEl.clientWidth - LEFT - RIGHT) + "px";
};
let player = null;
const nowPlaying = document.getElementById("now-playing");
const play = (url, peaks, durationMs, toSession, label) => {
  if (player !== null) player.destroy();
  const maxima = peaks.filter((_, i) => i % 2 === 1);
  player = WaveSurfer.create({ container: "#player", cspNonce: nonce, url: url, peaks: [maxima.length > 0 ? maxima : [0]], duration: Math.max(0.001, durationMs / 1000), height: 48, waveColor: "#55aa77", progressColor: "#226644", cursorColor: "#cc3333" });
  window.duplexPlayer = player;
  nowPlaying.textContent = closeBidi(label);
  player.on("timeupdate", (s) => { playheadMs = toSession(s * 1000); drawPlayhead(); });
  player.on("ready", () => { const p = player.play(); if (p && p.catch) p.catch((e) => { nowPlaying.textContent = closeBidi(label) + ": " + e.message; }); });
};
const audioUrl = (kind, id) => (data.audio.kind === "embed" ? (kind === "input" ? data.audio.input : data.audio.responses[id]) : data.audio.base + (kind === "input" ? "/input.wav" : "/responses/" + encodeURIComponent(id) + ".wav"));
document.getElementById("play-input").onclick = () => play(audioUrl("input"), t.input.peaks, t.input.duration_ms, inputToSession, "input (" + (t.input.duration_ms / 1000).toFixed(1) + " s)");

// The tables: the turn spans, the responses with their players, the marks with the filter.
const drawTables = () => {
  const bargeIns = t.marks.filter((m) => m.kind === "barge-in").length, errors = t.marks.filter((m) => m.kind === "error").length;
  const counts = { responses: t.responses.length, "barge-ins": bargeIns, errors: errors, turns: t.turns.length };
  for (const [name, n] of Object.entries(counts)) document.querySelector('[data-count="' + name + '"]').textContent = String(n);
  document.getElementById("state").textContent = closeBidi(t.state);
  document.getElementById("duration").textContent = (t.duration_ms / 1000).toFixed(1) + " s";
  const spans = document.getElementById("spans");
  for (const row of [...spans.querySelectorAll("tr.row")]) row.remove();
  for (const s of t.spans) { const tr = el("tr", "row"); for (const v of [s.span, s.samples, s.p50, s.p95, s.worst]) tr.appendChild(el("td", null, v === null ? "-" : String(v))); spans.appendChild(tr); }
  const table = document.getElementById("response-table");
  for (const row of [...table.querySelectorAll("tr.row")]) row.remove();
  for (const r of t.responses) {
    const tr = el("tr", "row");
    tr.dataset.response = r.id;
    const cells = [bdi(r.id), [r.status === null ? "running" : r.status].concat(r.reason ? [" (", bdi(r.reason), ")"] : []), r.audio_ms, Math.round(r.played_ms), r.heard_ms === null ? "-" : Math.round(r.heard_ms), bdi(r.transcript)];
    for (const v of cells) { const td = el("td"); td.append.apply(td, [].concat(v).map((x) => (x instanceof Node ? x : String(x)))); tr.appendChild(td); }
    const cell = el("td");
    if (r.audio_ms > 0) { const button = el("button", "play", "play"); button.onclick = () => play(audioUrl("response", r.id), r.peaks, r.audio_ms, (ms) => r.first_audio_ms + ms, r.id); cell.appendChild(button); }
    tr.appendChild(cell);
    table.appendChild(tr);
  }
  const list = document.getElementById("marks");
  list.textContent = "";
  for (const m of t.marks) { const li = el("li"); li.append((m.at_ms / 1000).toFixed(2) + " s  " + m.kind + "  ", bdi(m.label), "  (rev " + m.revision + ")"); li.dataset.rev = String(m.revision); li.dataset.kind = m.kind; li.onclick = () => select(m.revision); list.appendChild(li); }
  applyFilter();
  highlight();
};
const filter = document.getElementById("filter");
const shown = document.getElementById("shown");
const applyFilter = () => {
  const list = document.getElementById("marks");
  // A lone "-" (an exclusion being typed) excludes nothing.
  const terms = filter.value.toLowerCase().split(/\s+/).filter((w) => w !== "" && w !== "-");
  let n = 0;
  for (const li of list.children) { const text = li.textContent.toLowerCase(); const ok = terms.every((w) => (w.startsWith("-") ? !text.includes(w.slice(1)) : text.includes(w))); li.hidden = !ok; if (ok) n += 1; }
  shown.textContent = n + " of " + list.children.length + " shown";
};
filter.oninput = applyFilter;

const drawAll = () => { drawTables(); drawPlots(); drawLanes(); };
drawAll();
window.addEventListener("resize", () => { drawPlots(); drawLanes(); });
const fromHash = () => { const m = /^#rev=(\d+)$/.exec(location.hash); if (m) show(Number(m[1])); };
fromHash();
window.addEventListener("hashchange", fromHash);

// A live session: follow its /events tail after the last revision this page holds; Last-Event-ID on every reconnect.
const tailEl = document.getElementById("tail");
const tail = { last: data.live === null ? null : data.live.after, received: 0, gaps: 0, duplicates: 0, reconnects: 0, done: data.live === null, controller: null };
window.duplexTail = { state: tail, drop: () => { if (tail.controller !== null) tail.controller.abort(); } };
const tailStatus = (text) => { tailEl.textContent = text; for (const k of ["last", "received", "gaps", "duplicates", "reconnects"]) tailEl.dataset[k] = String(tail[k]); };
let refreshing = null;
const refresh = () => {
  if (refreshing !== null) return;
  refreshing = setTimeout(async () => {
    try {
      const res = await fetch(data.live.base + "/timeline.json");
      if (res.ok) { const following = view.to >= total; t = await res.json(); total = extentOf(t); if (following) view = { from: view.from, to: total }; drawAll(); }
    } finally { refreshing = null; }
  }, 300);
};
const onBlock = (block) => {
  let event = "message", id = null, line = "";
  for (const l of block.split("\n")) { if (l.startsWith("event: ")) event = l.slice(7); else if (l.startsWith("id: ")) id = Number(l.slice(4)); else if (l.startsWith("data: ")) line += l.slice(6); }
  if (event !== "entry" || id === null) return event;
  if (id <= tail.last) { tail.duplicates += 1; return event; }
  if (id > tail.last + 1) tail.gaps += 1;
  tail.last = id;
  tail.received += 1;
  data.entries[String(id)] = line;
  if (JSON.parse(line).type === "SessionClosed") tail.done = true;
  refresh();
  return event;
};
const follow = async () => {
  let failures = 0;
  while (!tail.done) {
    tail.controller = new AbortController();
    let caughtUp = false;
    try {
      const res = await fetch(data.live.base + "/events", { headers: { "Last-Event-ID": String(tail.last) }, signal: tail.controller.signal });
      if (!res.ok) throw new Error("HTTP " + res.status);
      tailStatus("live: following from revision " + tail.last);
      const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
      let buffer = "";
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) break;
        buffer += chunk.value;
        let i;
        while ((i = buffer.indexOf("\n\n")) >= 0) { const event = onBlock(buffer.slice(0, i)); buffer = buffer.slice(i + 2); failures = 0; if (event === "caught_up") caughtUp = true; }
        tailStatus("live: " + tail.received + " entries since the page loaded, last revision " + tail.last);
      }
      // Ended by the server: the session closed, or it is no longer live here.
      if (!caughtUp) tail.done = true;
    } catch (e) { tailStatus("live: disconnected (" + e.message + "), reconnecting"); }
    if (tail.done) break;
    tail.reconnects += 1;
    failures += 1;
    await new Promise((resolve) => setTimeout(resolve, Math.min(5000, 200 * 2 ** Math.min(failures, 5))));
  }
  refresh();
  tailStatus("ended: " + tail.received + " entries since the page loaded, last revision " + tail.last);
};
if (data.live !== null) follow(); else tailStatus("recorded");
`;
