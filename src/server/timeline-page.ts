import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { join } from "node:path";
import type { RecordedEntry } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { escapeMarkup } from "../infra/escape-markup.ts";
import { renderEntryLine } from "../infra/event-store/index.ts";
import {
  audioOf,
  closeBidiControls,
  isolateBidi,
  MARK_LANES,
  PEAKS_PER_SECOND,
  responseSamples,
  type Timeline,
} from "../replay/index.ts";
import { bdiMarkup } from "./page-security.ts";
import { PAGE_SCRIPT } from "./timeline-page-script.ts";
import { LEFT, PAGE_CSS, RIGHT } from "./timeline-page-style.ts";

/**
 * A session's timeline as one HTML page (issue 21, parts 1-2): served at `/sessions/:id` and written by `duplex
 * timeline` as a file that opens from disk. Everything is inside the page: the data (`timelineOf`, computed on the
 * server or by the CLI), the log entries its marks point at, and the two drawing libraries, read from node_modules
 * and inlined (never a CDN). uPlot (a small canvas plotter made for dense time series) draws the lanes of audio on
 * the session's time axis: the input's waveform from its precomputed peaks with the VAD curve and its threshold, and
 * each response's waveform placed where it played; wavesurfer.js is the player: it plays the input or a response
 * with its waveform drawn from the same peaks (it draws peaks without decoding audio) while a playhead moves on the
 * lanes. Together they are about 100 KB minified, 30 KB gzipped.
 *
 * On one time axis, zoomed and panned together (drag over a plot to zoom in, the wheel to zoom about the pointer,
 * shift-wheel, a drag on a lane or the arrow keys to pan, the buttons, double-click to see everything): the input
 * and its VAD, speech, the responses (bars from created to ended, and on each one's audio the generated, played and
 * heard marks and the cut), the turns' spans as a waterfall, and lanes of marks (input, decisions, outputs, errors,
 * connection). A click on any mark shows its log entry's JSON and revision; `#rev=N` selects one; a filter box (a
 * leading `-` excludes) says "N of M shown". A live session's page (`live`) follows its `/events` tail from the last
 * revision it holds, with `Last-Event-ID` on every reconnect, so no entry is lost or taken twice, and redraws from
 * `timeline.json` as entries arrive.
 *
 * Served, it runs under the Content-Security-Policy of src/server/page-security.ts: its inline scripts and style
 * carry the response's `nonce`, it has no inline style or handler attribute, and it fetches only from its origin.
 * Client text (ids, the model, transcripts, reasons, labels) is bidi-isolated wherever it is shown (issue 32, part
 * 3): `<bdi>` in the markup and in what the script inserts, FSI ... PDI in titles, and a log entry's JSON shows its
 * bidi controls as `\uXXXX` escapes.
 */
export interface TimelinePageInput {
  readonly timeline: Timeline;
  /** The session's log: the entries the marks and responses point at are put in the page. */
  readonly entries: readonly RecordedEntry[];
  /**
   * Where the players get their audio: `embed` (default) puts each WAV in the page as a data URL (the standalone
   * file); `{ base }` names the session API of a server (`${base}/input.wav`, `${base}/responses/ID.wav`).
   */
  readonly audio?: "embed" | { readonly base: string };
  /**
   * A live session on the server at `base` (the session API's `/v1/sessions/:id`): the page follows
   * `${base}/events` after the last entry of `entries` and refetches `${base}/timeline.json`. Absent: a finished
   * page.
   */
  readonly live?: { readonly base: string };
  /**
   * The nonce of the page's Content-Security-Policy (src/server/page-security.ts): put on each inline `<script>` and
   * `<style>` and handed to wavesurfer.js for the `<style>` it writes. Absent (the standalone file): no nonce.
   */
  readonly nonce?: string;
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

const base64Wav = (samples: Int16Array, rateHz: number): string =>
  `data:audio/wav;base64,${Buffer.from(encodeWav(samples, rateHz)).toString("base64")}`;

/** The page of `input.timeline`. Pure but for reading the libraries from node_modules once. */
export const renderTimelinePage = ({ timeline, entries, audio = "embed", live, nonce }: TimelinePageInput): string => {
  const { uplotJs, uplotCss, wavesurferJs } = libs();
  const marked = new Set(timeline.marks.map((m) => m.revision));
  for (const r of timeline.responses) {
    marked.add(r.started_revision);
    if (r.ended_revision !== null) marked.add(r.ended_revision);
  }
  const entryJson = Object.fromEntries(
    entries.filter((e) => marked.has(e.revision)).map((e) => [String(e.revision), renderEntryLine(e)]),
  );
  const sessionAudio = audio === "embed" ? audioOf(entries) : null;
  const audioData =
    sessionAudio === null
      ? { kind: "served", base: (audio as { base: string }).base }
      : {
          kind: "embed",
          input: base64Wav(pcm16FromBytes(sessionAudio.input.pcm16), sessionAudio.input.rateHz),
          responses: Object.fromEntries(
            [...sessionAudio.responses].flatMap(([id, r]) => {
              const samples = responseSamples(r);
              return samples instanceof Int16Array ? [[id, base64Wav(samples, r.rateHz)]] : [];
            }),
          ),
        };
  const data = {
    timeline,
    entries: entryJson,
    lanes: MARK_LANES,
    layout: { left: LEFT, right: RIGHT, peaks_per_second: PEAKS_PER_SECOND },
    audio: audioData,
    live: live === undefined ? null : { base: live.base, after: entries.at(-1)?.revision ?? -1 },
  };
  const bargeIns = timeline.marks.filter((m) => m.kind === "barge-in").length;
  const errors = timeline.marks.filter((m) => m.kind === "error").length;
  const chain =
    timeline.chain.verified === null
      ? "no chain (recorded before it)"
      : timeline.chain.verified
        ? "every entry the one written"
        : `BROKEN at revision ${timeline.chain.broken_at}`;
  const id = bdiMarkup(timeline.session_id);
  const nonceAttr = nonce === undefined ? "" : ` nonce="${escapeMarkup(nonce)}"`;
  const markLanes = Object.keys(MARK_LANES)
    .map(
      (name) => `<div class="row"><span class="label">${name}</span><div id="lane-${name}" class="lane"></div></div>`,
    )
    .join("\n");
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>duplex ${escapeMarkup(isolateBidi(timeline.session_id))}</title><link rel="icon" href="data:,">
<style${nonceAttr}>${uplotCss}${PAGE_CSS}</style></head>
<body>
<h1>session <code>${id}</code></h1>
<p id="summary"><span data-count="responses">${timeline.responses.length}</span> responses, <span data-count="barge-ins">${bargeIns}</span> barge-ins, <span data-count="errors">${errors}</span> errors, <span data-count="turns">${timeline.turns.length}</span> turns &middot; <bdi id="state">${escapeMarkup(closeBidiControls(timeline.state))}</bdi> &middot; model ${bdiMarkup(timeline.model ?? "-")} &middot; <span id="duration"></span> &middot; opened ${escapeMarkup(timeline.opened_at)} &middot; chain: <span id="chain">${escapeMarkup(chain)}</span> &middot; <span id="tail"></span></p>
<div id="toolbar"><button id="zoom-in">zoom in</button><button id="zoom-out">zoom out</button><button id="pan-left">&larr;</button><button id="pan-right">&rarr;</button><button id="zoom-reset">all</button> <span id="view"></span> &middot; <button id="play-input">play input</button> <bdi id="now-playing"></bdi></div>
<div id="player"></div>
<div id="lanes">
<h2>input: what the model heard, and the VAD probability against its threshold</h2><div id="input-plot"></div>
<h2>speech (server VAD)</h2><div class="row"><span class="label">speech</span><div id="speech" class="lane"></div></div>
<h2>responses: created to ended; on its audio, generated (grey), played (blue), heard (green), the cut (red)</h2><div id="responses-plot"></div><div class="row"><span class="label">responses</span><div id="responses" class="lane"></div></div>
<h2>turns: speech stop, commit, created, first audio, first ack</h2><div class="row"><span class="label">turns</span><div id="turns" class="lane"></div></div>
<h2>marks</h2>
${markLanes}
<div id="playhead" hidden></div>
</div>
<h2>turn spans (ms)</h2><table id="spans"><tr><th>span</th><th>samples</th><th>p50</th><th>p95</th><th>worst</th></tr></table>
<h2>responses</h2><table id="response-table"><tr><th>id</th><th>status</th><th>generated ms</th><th>played ms</th><th>heard ms</th><th>transcript</th><th></th></tr></table>
<h2>log entries</h2><input id="filter" placeholder="filter (a leading - excludes)" size="40"> <span id="shown"></span>
<ol id="marks"></ol>
<pre id="detail"></pre>
<script${nonceAttr}>${scriptSafe(uplotJs)}</script>
<script${nonceAttr}>${scriptSafe(wavesurferJs)}</script>
<script type="application/json" id="timeline-data">${jsonSafe(JSON.stringify(data))}</script>
<script${nonceAttr}>${scriptSafe(PAGE_SCRIPT)}</script>
</body></html>
`;
};
