import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDemo } from "../../src/cli/demo.ts";
import { RealtimeClient } from "../../src/client/index.ts";
import { stepsOf, streamOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { type Timeline, timelineOf } from "../../src/replay/index.ts";
import { renderTimelinePage } from "../../src/server/timeline-page.ts";
import { sharedAudio, startScriptedServer, startTestServer } from "../support/server.ts";

/**
 * The timeline page (issue 21, parts 1 and 4) in a real browser: Debian's Chromium driven by playwright-core (never a
 * browser download; .ci/run installs the `chromium` package). The standalone page of every recorded session, opened from
 * disk, and the page the server serves: no console error, the right counts, every mark on its lane, a click on a mark
 * shows its log entry, zoom, a response played from the page; and a live demo's page, which gains its responses as
 * they happen and loses no entry and takes none twice across a dropped tail. Without /usr/bin/chromium (a machine
 * where it was not installed) the suite says so and is skipped.
 */
const CHROMIUM = "/usr/bin/chromium";
const available = existsSync(CHROMIUM);
if (!available) console.warn(`timeline browser tests skipped: ${CHROMIUM} is missing (apt-get install chromium)`);
/** Where the screenshot of one page is written (README, "Where to go next"). */
const SCREENSHOT = join(process.cwd(), "artifacts", "timeline.png");

describe.skipIf(!available)("the timeline page in Chromium", () => {
  let browser: Browser;
  let dir = "";
  beforeAll(async () => {
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
    dir = await mkdtemp(join(tmpdir(), "duplex-timeline-"));
  });
  afterAll(async () => {
    await browser?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /**
   * Waits until `expression` is true in `page`, polling it every 50 ms through the DevTools protocol (which a page's
   * CSP does not govern; playwright's string predicates are evaluated with eval, which the policy refuses).
   * @throws Error after `timeoutMs` naming the expression.
   */
  const until = async (page: Page, expression: string, timeoutMs = 10_000): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    while (!(await page.evaluate(expression))) {
      if (Date.now() > deadline) throw new Error(`not true after ${timeoutMs} ms: ${expression}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  /**
   * A page that records what its Content-Security-Policy refused: every `securitypolicyviolation` event (from the
   * start of each document, before any of its scripts) and every console message that names the policy.
   */
  const watchedPage = async (): Promise<{ page: Page; errors: string[]; violations: () => Promise<string[]> }> => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors: string[] = [];
    const refused: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
      if (m.text().includes("Content Security Policy")) refused.push(`console: ${m.text()}`);
    });
    page.on("pageerror", (e) => errors.push(e.message));
    await page.addInitScript(
      'window.cspViolations = []; document.addEventListener("securitypolicyviolation", (e) => window.cspViolations.push(e.effectiveDirective + " " + e.blockedURI + " " + e.sample));',
    );
    const violations = async () => [
      ...refused,
      ...((await page.evaluate("window.cspViolations")) as string[]).map((v) => `event: ${v}`),
    ];
    return { page, errors, violations };
  };
  /** Opens `url` and returns the page with every console error and page error it had, and its response's headers. */
  const open = async (
    url: string,
  ): Promise<{
    page: Page;
    errors: string[];
    violations: () => Promise<string[]>;
    headers: Record<string, string>;
  }> => {
    const watched = await watchedPage();
    const response = await watched.page.goto(url);
    // The page's script has run once it says how many marks it shows.
    await until(watched.page, "(document.getElementById('shown')?.textContent ?? '') !== ''");
    return { ...watched, headers: response?.headers() ?? {} };
  };
  /** The headers every page the server serves sends (src/server/page-security.ts), and its nonce. */
  const expectPageHeaders = (headers: Record<string, string>): string => {
    expect(headers).toMatchObject({
      "content-type": "text/html; charset=utf-8",
      "x-content-type-options": "nosniff",
      "referrer-policy": "no-referrer",
      "x-frame-options": "DENY",
    });
    const policy = headers["content-security-policy"] ?? "";
    const nonce = /script-src 'nonce-([A-Za-z0-9+/=]+)'/.exec(policy)?.[1];
    expect(policy).toBe(
      `default-src 'none'; script-src 'nonce-${nonce}'; style-src 'nonce-${nonce}'; img-src 'self' data:; media-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'`,
    );
    return String(nonce);
  };
  /** wavesurfer.js drew the player: its waveform's canvas in its shadow root, styled by the <style> it wrote there. */
  const playerDrawn = (page: Page) =>
    page.evaluate(`(() => {
      const root = document.querySelector("#player > div")?.shadowRoot;
      const drawn = root?.querySelector(".canvases");
      return { canvases: root?.querySelectorAll("canvas").length ?? 0, styled: drawn ? getComputedStyle(drawn).pointerEvents : null };
    })()`) as Promise<{ canvases: number; styled: string | null }>;
  const count = (page: Page, name: string) => page.textContent(`[data-count="${name}"]`).then(Number);
  /** Clicks the play button of `id` and waits until its audio (`ms` long) plays and the playhead is on the lanes. */
  const playsResponse = async (page: Page, id: string, ms: number) => {
    await page.locator(`#response-table tr[data-response="${id}"] button.play`).click();
    await until(page, "(window.duplexPlayer?.getMediaElement().currentTime ?? 0) > 0");
    const duration = Number(await page.evaluate("window.duplexPlayer.getMediaElement().duration"));
    expect(Math.abs(duration * 1000 - ms)).toBeLessThan(25);
    expect(await page.textContent("#now-playing")).toBe(id);
    await page.waitForSelector("#playhead", { state: "visible" });
  };

  it.each(readdirSync(join(process.cwd(), "replays")).filter((f) => f.endsWith(".jsonl")))(
    "%s: the standalone page opens from disk with no error, shows the log's counts, and a mark shows its entry",
    async (file) => {
      const { entries } = await readSessionFile(join(process.cwd(), "replays", file));
      const timeline = timelineOf(entries);
      const path = join(dir, `${file}.html`);
      await writeFile(path, renderTimelinePage({ timeline, entries }));
      const { page, errors } = await open(`file://${path}`);
      const decisions = stepsOf(entries).flatMap((s) => s.decisions.map((d) => d.envelope.event));
      expect(await count(page, "responses")).toBe(decisions.filter((e) => e.type === "ResponseEnded").length);
      expect(await count(page, "barge-ins")).toBe(
        decisions.filter((e) => e.type === "OverlapDecided" && e.data.action === "barge_in").length,
      );
      expect(await count(page, "errors")).toBe(timeline.marks.filter((m) => m.kind === "error").length);
      expect(await count(page, "turns")).toBe(timeline.turns.length);
      expect(await page.textContent("#chain")).toBe("every entry the one written");
      // Drawn by uPlot: the input's waveform with the VAD curve, the responses' waveforms; one bar per response.
      const plotted = (id: string) => page.locator(`#${id} canvas`).count();
      expect(await plotted("input-plot")).toBe(timeline.input.peaks.length + timeline.vad.points.length > 0 ? 1 : 0);
      expect(await plotted("responses-plot")).toBe(timeline.responses.some((r) => r.peaks.length > 0) ? 1 : 0);
      expect(await page.locator("#responses .bar").count()).toBe(timeline.responses.length);
      const marks = timeline.marks.length;
      expect(await page.textContent("#shown")).toBe(`${marks} of ${marks} shown`);
      // Every mark on its lane, and on each response's audio its generated, played and heard marks.
      expect(await page.locator("#lanes .tick.mark").count()).toBe(marks);
      const spoken = timeline.responses.filter((r) => r.first_audio_ms !== null);
      expect(await page.locator("#responses .tick.generated").count()).toBe(spoken.length);
      expect(await page.locator("#responses .tick.heard").count()).toBe(
        spoken.filter((r) => r.heard_ms !== null).length,
      );
      expect(await page.locator("#responses .tick.cut").count()).toBe(
        timeline.responses.filter((r) => r.status === "cancelled").length,
      );
      if (marks > 0) {
        const first = timeline.marks[0];
        await page.locator("#marks li").first().click();
        const detail = (await page.textContent("#detail")) ?? "";
        expect(detail.startsWith(`revision ${first?.revision}\n`)).toBe(true);
        expect(JSON.parse(detail.slice(detail.indexOf("\n") + 1))).toMatchObject({ revision: first?.revision });
        expect(page.url()).toMatch(new RegExp(`#rev=${first?.revision}$`));
        // The same mark on its lane selects the same entry.
        const last = timeline.marks.at(-1);
        await page.locator(`#lanes .tick.mark[data-rev="${last?.revision}"]`).first().click();
        expect(((await page.textContent("#detail")) ?? "").startsWith(`revision ${last?.revision}\n`)).toBe(true);
        // The selection outlives a redraw (a zoom), and a new #rev=N in the address selects its entry.
        await page.click("#zoom-in");
        expect(await page.locator(`#lanes .tick.mark.selected[data-rev="${last?.revision}"]`).count()).toBe(1);
        await page.click("#zoom-reset");
        await page.evaluate(`location.hash = "rev=${first?.revision}"`);
        await until(page, `document.getElementById("detail").textContent.startsWith("revision ${first?.revision}\\n")`);
        // The filter: a leading - excludes; a lone - (being typed) excludes nothing.
        await page.fill("#filter", "-");
        expect(await page.textContent("#shown")).toBe(`${marks} of ${marks} shown`);
        await page.fill("#filter", `-${first?.kind}`);
        const left = timeline.marks.filter(
          (m) => !`${m.kind} ${m.label}`.toLowerCase().includes(String(first?.kind)),
        ).length;
        expect(await page.textContent("#shown")).toBe(`${left} of ${marks} shown`);
      }
      // Zoom: every lane on the middle half of the session, then all of it again.
      // The axis reaches the end of the session, or of a response's audio played past it.
      const total = Math.max(
        1,
        timeline.duration_ms,
        ...timeline.responses.map((r) => (r.first_audio_ms === null ? 0 : r.first_audio_ms + r.audio_ms)),
      );
      const seconds = (ms: number) => (ms / 1000).toFixed(2);
      await page.click("#zoom-in");
      expect(await page.textContent("#view")).toBe(
        `${seconds(total / 4)} to ${seconds((3 * total) / 4)} s of ${seconds(total)}`,
      );
      await page.click("#zoom-reset");
      expect(await page.textContent("#view")).toBe(`0.00 to ${seconds(total)} s of ${seconds(total)}`);
      // Play a response from the page: the player's audio is that response's, and the playhead moves.
      const played = spoken.find((r) => r.audio_ms > 0);
      if (played !== undefined) await playsResponse(page, played.id, played.audio_ms);
      expect(errors).toEqual([]);
      await page.close();
    },
  );

  it("the server serves /sessions and /sessions/:id for a session it ran, with its audio, with no error", async () => {
    const server = await startTestServer();
    try {
      const client = await RealtimeClient.connect(server.url);
      const id = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await client.waitFor("response.done", { since: 0 });
      client.send({ type: "session.close" });
      await client.closed;
      const base = `http://127.0.0.1:${server.port}`;
      // The list is a page of GET /v1/sessions, newest first, with the same filters.
      const other = await RealtimeClient.connect(server.url);
      const otherId = String(((await other.waitFor("session.created", { since: 0 })).session as { id: string }).id);
      const { page: list, errors: listErrors, violations: listViolations } = await watchedPage();
      const listed = await list.goto(`${base}/sessions`);
      expectPageHeaders(listed?.headers() ?? {});
      // The page's own style applies under the policy: it came with the response's nonce.
      expect(await list.evaluate("getComputedStyle(document.body).marginLeft")).toBe("20px");
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([
        otherId,
        id,
      ]);
      await list.goto(`${base}/sessions?state=closed`);
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([id]);
      await list.goto(`${base}/sessions?limit=1`);
      await list.click("#next");
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([id]);
      expect(await listViolations()).toEqual([]);
      expect(listErrors).toEqual([]);
      await list.close();
      other.send({ type: "session.close" });
      await other.closed;
      const { page, errors, violations, headers } = await open(`${base}/sessions/${id}`);
      const nonce = expectPageHeaders(headers);
      // Each inline script and style carries the nonce of this response, and a second response draws another.
      expect(
        await page.evaluate("[...document.querySelectorAll('script:not([type]), style')].map((e) => e.nonce)"),
      ).toEqual([nonce, nonce, nonce, nonce]);
      const again = await fetch(`${base}/sessions/${id}`);
      expect(expectPageHeaders(Object.fromEntries(again.headers))).not.toBe(nonce);
      expect(await count(page, "responses")).toBe(1);
      expect(await page.locator("#responses .bar.completed").count()).toBe(1);
      expect(await page.textContent("#tail")).toBe("recorded");
      // The served page plays from the session API, not from audio put in the page.
      const timeline = (await (await fetch(`${base}/v1/sessions/${id}/timeline.json`)).json()) as Timeline;
      const response = timeline.responses[0];
      expect(await page.content()).not.toContain("data:audio/wav");
      // uPlot drew the response's audio, and the page's stylesheet applies.
      expect(response?.peaks.length).toBeGreaterThan(0);
      expect(await page.locator("#responses-plot canvas").count()).toBe(1);
      expect(await page.evaluate("getComputedStyle(document.getElementById('detail')).whiteSpace")).toBe("pre-wrap");
      if (response !== undefined) await playsResponse(page, response.id, response.audio_ms);
      // wavesurfer.js drew its waveform, and the <style> it wrote in its shadow root applies (it has the nonce).
      const player = await playerDrawn(page);
      expect(player.styled).toBe("none");
      expect(player.canvases).toBeGreaterThan(0);
      expect(await violations()).toEqual([]);
      expect(errors).toEqual([]);
      await page.close();
      expect((await fetch(`${base}/sessions/sess_nope`)).status).toBe(404);
    } finally {
      await server.stop();
    }
  });

  it("a live demo's page gains its responses as they happen, and a dropped tail loses and repeats no entry", async () => {
    const server = await startTestServer();
    const out = await mkdtemp(join(tmpdir(), "duplex-live-demo-"));
    try {
      const base = `http://127.0.0.1:${server.port}`;
      // The demo streams jfk_16k.wav (11 s) at real time and plays the answers; the page opens while it runs.
      const demo = runDemo({ url: server.url, input: sharedAudio("jfk_16k.wav"), out });
      let id: string | undefined;
      while (id === undefined) {
        await new Promise((resolve) => setTimeout(resolve, 100));
        const listed = (await (await fetch(`${base}/v1/sessions?state=open`)).json()) as { data: { id: string }[] };
        id = listed.data[0]?.id;
      }
      const { page, errors, violations, headers } = await open(`${base}/sessions/${id}`);
      expectPageHeaders(headers);
      const loadedWith = Number(
        await page.evaluate('JSON.parse(document.getElementById("timeline-data").textContent).live.after'),
      );
      let finished = false;
      void demo.then(() => {
        finished = true;
      });
      // The tail follows from the last revision the page was rendered with.
      await until(page, 'document.getElementById("tail").textContent.startsWith("live:")');
      await until(page, "Number(document.querySelector('[data-count=\"responses\"]').textContent) >= 1", 30_000);
      // The demo still runs when the page shows its first response: the page follows the session as it happens.
      expect(finished).toBe(false);
      // The tail drops (as a network would) and reconnects with Last-Event-ID while the session appends.
      await page.evaluate("window.duplexTail.drop()");
      const summary = await demo;
      await until(page, 'document.getElementById("tail").textContent.startsWith("ended:")', 30_000);
      const entries = await server.store.read(streamOf(id));
      const tail = (await page.evaluate("window.duplexTail.state")) as Record<string, number>;
      expect(tail.gaps).toBe(0);
      expect(tail.duplicates).toBe(0);
      expect(tail.reconnects).toBeGreaterThanOrEqual(1);
      expect(tail.last).toBe(entries.at(-1)?.revision);
      expect(tail.received).toBe((entries.at(-1)?.revision ?? 0) - loadedWith);
      // After the last refresh the page shows what the log holds.
      const final = timelineOf(entries);
      await until(page, 'document.getElementById("state").textContent === "closed"');
      expect(await count(page, "responses")).toBe(final.responses.length);
      expect(final.responses.length).toBe(summary.responses);
      expect(await count(page, "turns")).toBe(final.turns.length);
      expect(await page.locator("#responses .bar").count()).toBe(final.responses.length);
      // uPlot drew what the model heard and what it said, as the tail brought it.
      expect(await page.locator("#input-plot canvas").count()).toBe(1);
      expect(await page.locator("#responses-plot canvas").count()).toBe(1);
      await mkdir(join(process.cwd(), "artifacts"), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      // The tail's fetches of /events and timeline.json are this origin's (connect-src 'self'): nothing refused.
      expect(await violations()).toEqual([]);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await server.stop();
      await rm(out, { recursive: true, force: true });
    }
  }, 60_000);
  it("client text with unclosed bidi controls is isolated: the page's own text after it reads as written", async () => {
    // U+202E (RLO) and U+2067 (RLI) opened and never closed: in the model's speech, a tool's name and arguments, the
    // instructions, and an event type the server rejects (its error message quotes it).
    const RLO = "\u202e";
    const RLI = "\u2067";
    const server = await startScriptedServer([
      "name: bidi",
      "when_exhausted: repeat_last",
      "capabilities: { supports_tool_calls: true }",
      "turns:",
      "  - on: respond",
      "    actions:",
      '      - speak: { text: "evil \\u202Ebackwards", duration_ms: 600 }',
      '      - tool_call: { name: "look\\u202Eup", call_id: call_1, arguments: { city: "Pa\\u2067ris" } }',
      "      - end_turn",
    ]);
    try {
      const client = await RealtimeClient.connect(server.url);
      const id = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
      client.send({ type: "session.update", session: { instructions: `be ${RLO}reversed` } });
      await client.waitFor("session.updated", { since: 0 });
      client.send({ type: `${RLO}bogus` });
      await client.waitFor("error", { since: 0 });
      client.send({ type: "response.create", response: { instructions: "Answer." } });
      await client.waitFor("response.done", { since: 0, timeoutMs: 10_000 });
      client.send({ type: "session.close" });
      await client.closed;
      const base = `http://127.0.0.1:${server.port}`;
      const timeline = (await (await fetch(`${base}/v1/sessions/${id}/timeline.json`)).json()) as Timeline;
      // The timeline's labels close each piece of client text where it ends (src/replay/bidi-text.ts).
      const labels = timeline.marks.map((m) => m.label);
      expect(labels).toContain(`look${RLO}up\u202c({"city":"Pa${RLI}ris"}\u2069)`);
      expect(labels).toContain(`unknown_event: unknown event type "${RLO}bogus"\u202c`);
      expect(timeline.responses[0]?.transcript).toBe(`evil ${RLO}backwards`);
      // The markup: the server's own words around client text in <bdi>.
      const html = await (await fetch(`${base}/sessions/${id}`)).text();
      expect(html).toContain(`<h1>session <code><bdi>${id}</bdi></code></h1>`);
      expect(html).toMatch(/ &middot; model <bdi>[^<]*<\/bdi> &middot; /);
      expect(html).toContain('<bdi id="state">closed</bdi>');
      const list = await (await fetch(`${base}/sessions`)).text();
      expect(list).toContain(`<a href="/sessions/${id}"><bdi>${id}</bdi></a></td>`);
      expect(list).toContain("<td><bdi>closed</bdi></td>");

      const { page, errors, violations } = await open(`${base}/sessions/${id}`);
      // What the page's script inserts: each label in a <bdi> of its list item, the transcript in one of its cell.
      const isolated = (await page.evaluate(
        "[...document.querySelectorAll('#marks li > bdi')].map((b) => b.textContent)",
      )) as string[];
      expect(isolated).toEqual(labels);
      expect(await page.textContent("#response-table tr.row td:nth-child(6) > bdi")).toBe(`evil ${RLO}backwards\u202c`);
      // The titles (plain text) hold client text between FSI and PDI, closed.
      const title = await page.getAttribute("#responses .bar", "title");
      expect(title).toContain(`: \u2068evil ${RLO}backwards\u202c\u2069`);
      // The detail pane shows the controls of an entry's JSON as escapes, and the JSON still parses.
      const rejected = timeline.marks.find((m) => m.kind === "error");
      await page.locator(`#marks li[data-rev="${rejected?.revision}"]`).click();
      const detail = (await page.textContent("#detail")) ?? "";
      expect(detail).toContain("\\u202e");
      expect(detail).not.toContain(RLO);
      expect(JSON.stringify(JSON.parse(detail.slice(detail.indexOf("\n") + 1)))).toContain(RLO);

      /** The left edge of each visible character of `text` in the last text node under `selector` that holds it, px. */
      const lefts = (selector: string, text: string) =>
        page.evaluate(`(() => {
          const nodes = [];
          const walk = document.createTreeWalker(document.querySelector(${JSON.stringify(selector)}), NodeFilter.SHOW_TEXT);
          while (walk.nextNode()) if (walk.currentNode.data.includes(${JSON.stringify(text)})) nodes.push(walk.currentNode);
          const node = nodes[nodes.length - 1];
          const at = node.data.lastIndexOf(${JSON.stringify(text)});
          const out = [];
          for (let i = at; i < at + ${text.length}; i++) {
            if (/\\s/.test(node.data[i])) continue;
            const r = document.createRange(); r.setStart(node, i); r.setEnd(node, i + 1);
            out.push(r.getBoundingClientRect().left);
          }
          return out;
        })()`) as Promise<number[]>;
      const increasing = (xs: readonly number[]) =>
        xs.length > 1 && xs.every((x, i) => i === 0 || x > (xs[i - 1] ?? 0));
      const tool = timeline.marks.find((m) => m.kind === "tool-call");
      // After each label, the page's "(rev N)" reads left to right; so does the server's "(" after the tool's name.
      for (const m of [tool, rejected]) {
        const selector = `#marks li[data-rev="${m?.revision}"]`;
        expect(increasing(await lefts(selector, `(rev ${m?.revision})`))).toBe(true);
      }
      expect(increasing(await lefts(`#marks li[data-rev="${tool?.revision}"] > bdi`, '({"city'))).toBe(true);
      // The same text not isolated is reversed: what the measure would see without the <bdi> and the closers.
      await page.evaluate(
        `(() => { const li = document.createElement("li"); li.id = "raw"; li.textContent = "look${RLO}up(rev 7)"; document.getElementById("marks").appendChild(li); })()`,
      );
      const reversed = await lefts("#raw", "(rev 7)");
      expect(increasing([...reversed].reverse())).toBe(true);
      expect(await violations()).toEqual([]);
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await server.stop();
    }
  });
});
