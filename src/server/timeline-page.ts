import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { RecordedEntry, Timeline } from "../engine/index.ts";
import { renderEntryLine } from "../infra/event-store/index.ts";
import { summariseTurns } from "../projections/index.ts";

/**
 * A session's timeline as one HTML page (issue 21, parts 1-2): served at `/sessions/:id` and written by `duplex
 * timeline` as a file that opens from disk. Everything is inside the page: the data (`timelineOf`, computed on the
 * server or by the CLI), the log entries its marks point at, and the two drawing libraries, read from node_modules
 * and inlined (never a CDN): wavesurfer.js draws the input's waveform from its precomputed peaks (it renders peaks
 * without decoding audio), uPlot the VAD curve against its threshold (a small canvas plotter made for dense time
 * series; both together are about 100 KB minified, 30 KB gzipped).
 *
 * The page shows the counts (responses, barge-ins, errors, turns), the chain's verdict, the input lane, the
 * responses on one time axis with their status, the turn spans' p50/p95/worst, and every mark; a click on a mark
 * shows its log entry's JSON and revision, `#rev=N` selects one, and a filter box (a leading `-` excludes) says
 * "N of M shown".
 */
export interface TimelinePageInput {
  readonly timeline: Timeline;
  /** The session's log: the entries the marks point at are put in the page. */
  readonly entries: readonly RecordedEntry[];
}

const require = createRequire(import.meta.url);
/**
 * A file of an npm package's folder, found from its main entry (its exports map lists neither package.json nor the
 * minified builds): `dist/...` beside the entry's `dist/`.
 */
const packageFile = (pkg: string, file: string): string => {
  const entry = require.resolve(pkg);
  const root = entry.slice(0, entry.lastIndexOf(`${pkg}/`) + pkg.length + 1);
  return readFileSync(join(root, file), "utf8");
};

let libraries: { uplotJs: string; uplotCss: string; wavesurferJs: string } | null = null;
const libs = () => {
  libraries ??= {
    uplotJs: packageFile("uplot", "dist/uPlot.iife.min.js"),
    uplotCss: packageFile("uplot", "dist/uPlot.min.css"),
    wavesurferJs: packageFile("wavesurfer.js", "dist/wavesurfer.min.js"),
  };
  return libraries;
};

/** Code made safe inside a <script> element: no `</script` can end it early. */
const scriptSafe = (code: string): string => code.replace(/<\/(script)/gi, "<\\/$1");
/** JSON made safe inside a <script> element: every `<` written as \u003c (inside strings, the only place it can be). */
const jsonSafe = (json: string): string => json.replaceAll("<", "\\u003c");
const escapeHtml = (text: string): string =>
  text.replaceAll("&", "&amp;").replaceAll("<", "&lt;").replaceAll(">", "&gt;").replaceAll('"', "&quot;");

/** The page's own script: draws the lanes from the embedded data (runs in the browser). */
const PAGE_SCRIPT = `
const data = JSON.parse(document.getElementById("timeline-data").textContent);
const t = data.timeline;
const total = Math.max(1, t.duration_ms);
const pct = (ms) => (100 * ms) / total + "%";
const detail = document.getElementById("detail");
const show = (rev) => {
  const entry = data.entries[String(rev)];
  detail.textContent = entry === undefined ? "revision " + rev + ": not in this page" : "revision " + rev + "\\n" + JSON.stringify(JSON.parse(entry), null, 2);
  for (const li of document.querySelectorAll("#marks li")) li.classList.toggle("selected", li.dataset.rev === String(rev));
};
// The input: waveform from the precomputed peaks (max of each bucket), no audio decoded.
const maxima = t.input.peaks.filter((_, i) => i % 2 === 1);
if (maxima.length > 0) WaveSurfer.create({ container: "#input-wave", peaks: [maxima], duration: Math.max(0.001, t.input.duration_ms / 1000), height: 60, interact: false, waveColor: "#5a7", cursorWidth: 0 });
// The VAD curve and its threshold, on the input clock (s of input, as the waveform above it).
const xs = t.vad.points.map((p) => p[0] / 1000);
if (xs.length > 0) new uPlot({ width: Math.max(600, document.body.clientWidth - 40), height: 140, scales: { x: { time: false }, y: { range: [0, 1] } }, series: [{ label: "input s" }, { label: "VAD", stroke: "#37a" }, { label: "threshold", stroke: "#c33", dash: [4, 4] }] }, [xs, t.vad.points.map((p) => p[1]), xs.map(() => t.vad.threshold)], document.getElementById("vad"));
// Speech and responses as bars on one axis.
const lane = (id, items) => { const el = document.getElementById(id); for (const it of items) { const bar = document.createElement("div"); bar.className = "bar " + it.cls; bar.style.left = pct(it.from); bar.style.width = pct(Math.max(it.to - it.from, total / 500)); bar.title = it.title; bar.textContent = it.text; if (it.rev !== undefined) bar.onclick = () => show(it.rev); el.appendChild(bar); } };
lane("speech", t.speech.map((s) => ({ from: s.start_ms, to: s.stop_ms ?? total, cls: "speech", title: s.item_id, text: "" })));
lane("responses", t.responses.map((r) => ({ from: r.created_ms, to: r.ended_ms ?? total, cls: r.status ?? "open", title: r.id + " " + (r.status ?? "running") + (r.reason ? " (" + r.reason + ")" : "") + ": " + r.transcript, text: r.id.replace(/^resp_[0-9a-f]+_/, "#"), rev: r.ended_revision })));
// Marks: a list with a filter, each clickable to its log entry; #rev=N selects one.
const list = document.getElementById("marks");
for (const m of t.marks) { const li = document.createElement("li"); li.dataset.rev = String(m.revision); li.dataset.kind = m.kind; li.textContent = (m.at_ms / 1000).toFixed(2) + " s  " + m.kind + "  " + m.label + "  (rev " + m.revision + ")"; li.onclick = () => { location.hash = "rev=" + m.revision; show(m.revision); }; list.appendChild(li); }
const filter = document.getElementById("filter");
const shown = document.getElementById("shown");
const apply = () => { const terms = filter.value.toLowerCase().split(/\\s+/).filter(Boolean); let n = 0; for (const li of list.children) { const text = li.textContent.toLowerCase(); const ok = terms.every((w) => (w.startsWith("-") ? !text.includes(w.slice(1)) : text.includes(w))); li.hidden = !ok; if (ok) n += 1; } shown.textContent = n + " of " + list.children.length + " shown"; };
filter.oninput = apply;
apply();
const fromHash = /^#rev=(\\d+)$/.exec(location.hash);
if (fromHash) show(Number(fromHash[1]));
`;

const PAGE_CSS = `
body { font: 14px system-ui, sans-serif; margin: 16px 20px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 14px; margin: 16px 0 4px; color: #555; }
.lane { position: relative; height: 26px; background: #f4f4f4; border-radius: 3px; }
.bar { position: absolute; top: 3px; height: 20px; border-radius: 3px; font-size: 11px; color: #fff; overflow: hidden; white-space: nowrap; cursor: pointer; }
.bar.speech { background: #5a7; } .bar.completed { background: #37a; } .bar.cancelled { background: #c73; }
.bar.failed, .bar.incomplete { background: #c33; } .bar.open { background: #999; }
#marks { font: 12px ui-monospace, monospace; max-height: 260px; overflow: auto; padding-left: 24px; }
#marks li { cursor: pointer; } #marks li.selected { background: #ffe9a8; }
#detail { font: 12px ui-monospace, monospace; background: #f7f7f7; padding: 8px; white-space: pre-wrap; min-height: 2em; }
table { border-collapse: collapse; font-size: 12px; } td, th { padding: 2px 10px; text-align: right; } td:first-child, th:first-child { text-align: left; }
`;

/** The page of `input.timeline`. Pure but for reading the libraries from node_modules once. */
export const renderTimelinePage = ({ timeline, entries }: TimelinePageInput): string => {
  const { uplotJs, uplotCss, wavesurferJs } = libs();
  const marked = new Set(timeline.marks.map((m) => m.revision));
  const ended = new Map<string, number>();
  for (const e of entries)
    if (e.type === "ResponseEnded") ended.set((e.data as { responseId: string }).responseId, e.revision);
  for (const revision of ended.values()) marked.add(revision);
  const entryJson = Object.fromEntries(
    entries.filter((e) => marked.has(e.revision)).map((e) => [String(e.revision), renderEntryLine(e)]),
  );
  const data = {
    timeline: {
      ...timeline,
      responses: timeline.responses.map((r) => ({ ...r, ended_revision: ended.get(r.id) })),
    },
    entries: entryJson,
  };
  const bargeIns = timeline.marks.filter((m) => m.kind === "barge-in").length;
  const errors = timeline.marks.filter((m) => m.kind === "error").length;
  const turns = timeline.turns.length;
  const chain =
    timeline.chain.verified === null
      ? "no chain (recorded before it)"
      : timeline.chain.verified
        ? "every entry the one written"
        : `BROKEN at revision ${timeline.chain.broken_at}`;
  const spans = summariseTurns(timeline.turns)
    .map(
      (s) =>
        `<tr><td>${s.span}</td><td>${s.samples}</td><td>${s.p50 ?? "-"}</td><td>${s.p95 ?? "-"}</td><td>${s.worst ?? "-"}</td></tr>`,
    )
    .join("");
  const id = escapeHtml(timeline.session_id);
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>duplex ${id}</title>
<style>${uplotCss}${PAGE_CSS}</style></head>
<body>
<h1>session <code>${id}</code></h1>
<p id="summary"><span data-count="responses">${timeline.responses.length}</span> responses, <span data-count="barge-ins">${bargeIns}</span> barge-ins, <span data-count="errors">${errors}</span> errors, <span data-count="turns">${turns}</span> turns &middot; ${escapeHtml(timeline.state)} &middot; model ${escapeHtml(timeline.model ?? "-")} &middot; ${(timeline.duration_ms / 1000).toFixed(1)} s &middot; opened ${escapeHtml(timeline.opened_at)} &middot; chain: <span id="chain">${escapeHtml(chain)}</span></p>
<h2>input: what the model heard, and the VAD</h2><div id="input-wave"></div><div id="vad"></div>
<h2>speech (server VAD)</h2><div id="speech" class="lane"></div>
<h2>responses</h2><div id="responses" class="lane"></div>
<h2>turn spans (ms)</h2><table id="spans"><tr><th>span</th><th>samples</th><th>p50</th><th>p95</th><th>worst</th></tr>${spans}</table>
<h2>marks</h2><input id="filter" placeholder="filter (a leading - excludes)" size="40"> <span id="shown"></span>
<ol id="marks"></ol>
<pre id="detail"></pre>
<script>${scriptSafe(uplotJs)}</script>
<script>${scriptSafe(wavesurferJs)}</script>
<script type="application/json" id="timeline-data">${jsonSafe(JSON.stringify(data))}</script>
<script>${PAGE_SCRIPT}</script>
</body></html>
`;
};
