import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { runDemo } from "../../src/cli/demo.ts";
import { RealtimeClient } from "../../src/client/index.ts";
import { stepsOf, streamOf, type Timeline, timelineOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { renderTimelinePage } from "../../src/server/timeline-page.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";

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

  /** Opens `url` and returns the page with every console error and page error it had. */
  const open = async (url: string): Promise<{ page: Page; errors: string[] }> => {
    const page = await browser.newPage({ viewport: { width: 1200, height: 900 } });
    const errors: string[] = [];
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(m.text());
    });
    page.on("pageerror", (e) => errors.push(e.message));
    await page.goto(url);
    // The page's script has run once it says how many marks it shows.
    await page.waitForFunction("(document.getElementById('shown')?.textContent ?? '') !== ''");
    return { page, errors };
  };
  const count = (page: Page, name: string) => page.textContent(`[data-count="${name}"]`).then(Number);
  /** Clicks the play button of `id` and waits until its audio (`ms` long) plays and the playhead is on the lanes. */
  const playsResponse = async (page: Page, id: string, ms: number) => {
    await page.locator(`#response-table tr[data-response="${id}"] button.play`).click();
    await page.waitForFunction("(window.duplexPlayer?.getMediaElement().currentTime ?? 0) > 0");
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
        await page.waitForFunction(
          `document.getElementById("detail").textContent.startsWith("revision ${first?.revision}\\n")`,
        );
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
      client.send({ type: "response.create" });
      await client.waitFor("response.done", { since: 0 });
      client.send({ type: "session.close" });
      await client.closed;
      const base = `http://127.0.0.1:${server.port}`;
      // The list is a page of GET /v1/sessions, newest first, with the same filters.
      const other = await RealtimeClient.connect(server.url);
      const otherId = String(((await other.waitFor("session.created", { since: 0 })).session as { id: string }).id);
      const list = await browser.newPage();
      await list.goto(`${base}/sessions`);
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([
        otherId,
        id,
      ]);
      await list.goto(`${base}/sessions?state=closed`);
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([id]);
      await list.goto(`${base}/sessions?limit=1`);
      await list.click("#next");
      expect(await list.locator("#sessions a").evaluateAll((links) => links.map((a) => a.textContent))).toEqual([id]);
      await list.close();
      other.send({ type: "session.close" });
      await other.closed;
      const { page, errors } = await open(`${base}/sessions/${id}`);
      expect(await count(page, "responses")).toBe(1);
      expect(await page.locator("#responses .bar.completed").count()).toBe(1);
      expect(await page.textContent("#tail")).toBe("recorded");
      // The served page plays from the session API, not from audio put in the page.
      const timeline = (await (await fetch(`${base}/v1/sessions/${id}/timeline.json`)).json()) as Timeline;
      const response = timeline.responses[0];
      expect(await page.content()).not.toContain("data:audio/wav");
      if (response !== undefined) await playsResponse(page, response.id, response.audio_ms);
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
      const { page, errors } = await open(`${base}/sessions/${id}`);
      const loadedWith = Number(
        await page.evaluate('JSON.parse(document.getElementById("timeline-data").textContent).live.after'),
      );
      let finished = false;
      void demo.then(() => {
        finished = true;
      });
      // The tail follows from the last revision the page was rendered with.
      await page.waitForFunction('document.getElementById("tail").textContent.startsWith("live:")');
      await page.waitForFunction(
        "Number(document.querySelector('[data-count=\"responses\"]').textContent) >= 1",
        null,
        {
          timeout: 30_000,
        },
      );
      // The demo still runs when the page shows its first response: the page follows the session as it happens.
      expect(finished).toBe(false);
      // The tail drops (as a network would) and reconnects with Last-Event-ID while the session appends.
      await page.evaluate("window.duplexTail.drop()");
      const summary = await demo;
      await page.waitForFunction('document.getElementById("tail").textContent.startsWith("ended:")', null, {
        timeout: 30_000,
      });
      const entries = await server.store.read(streamOf(id));
      const tail = (await page.evaluate("window.duplexTail.state")) as Record<string, number>;
      expect(tail.gaps).toBe(0);
      expect(tail.duplicates).toBe(0);
      expect(tail.reconnects).toBeGreaterThanOrEqual(1);
      expect(tail.last).toBe(entries.at(-1)?.revision);
      expect(tail.received).toBe((entries.at(-1)?.revision ?? 0) - loadedWith);
      // After the last refresh the page shows what the log holds.
      const final = timelineOf(entries);
      await page.waitForFunction('document.getElementById("state").textContent === "closed"');
      expect(await count(page, "responses")).toBe(final.responses.length);
      expect(final.responses.length).toBe(summary.responses);
      expect(await count(page, "turns")).toBe(final.turns.length);
      expect(await page.locator("#responses .bar").count()).toBe(final.responses.length);
      await mkdir(join(process.cwd(), "artifacts"), { recursive: true });
      await page.screenshot({ path: SCREENSHOT, fullPage: true });
      expect(errors).toEqual([]);
      await page.close();
    } finally {
      await server.stop();
      await rm(out, { recursive: true, force: true });
    }
  }, 60_000);
});
