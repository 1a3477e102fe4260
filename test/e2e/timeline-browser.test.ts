import { existsSync, readdirSync } from "node:fs";
import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { stepsOf, timelineOf } from "../../src/engine/index.ts";
import { readSessionFile } from "../../src/infra/event-store/index.ts";
import { renderTimelinePage } from "../../src/server/timeline-page.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The timeline page (issue 21, parts 1 and 4) in a real browser: Debian's Chromium driven by playwright-core (never a
 * browser download; .ci/run installs the `chromium` package). The standalone page of every recorded session, opened from
 * disk, and the page the server serves: no console error, the right counts, a click on a mark shows its log entry.
 * Without /usr/bin/chromium (a machine where it was not installed) the suite says so and is skipped.
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
      // Drawn: the VAD curve by uPlot, the input's waveform by wavesurfer.js, one bar per response.
      if (timeline.vad.points.length > 0) expect(await page.locator("#vad canvas").count()).toBeGreaterThan(0);
      if (timeline.input.peaks.length > 0) expect(await page.locator("#input-wave > *").count()).toBeGreaterThan(0);
      expect(await page.locator("#responses .bar").count()).toBe(timeline.responses.length);
      const marks = timeline.marks.length;
      expect(await page.textContent("#shown")).toBe(`${marks} of ${marks} shown`);
      if (marks > 0) {
        const first = timeline.marks[0];
        await page.locator("#marks li").first().click();
        const detail = (await page.textContent("#detail")) ?? "";
        expect(detail.startsWith(`revision ${first?.revision}\n`)).toBe(true);
        expect(JSON.parse(detail.slice(detail.indexOf("\n") + 1))).toMatchObject({ revision: first?.revision });
        expect(page.url()).toMatch(new RegExp(`#rev=${first?.revision}$`));
        // The filter: a leading - excludes.
        await page.fill("#filter", `-${first?.kind}`);
        const left = timeline.marks.filter(
          (m) => !`${m.kind} ${m.label}`.toLowerCase().includes(String(first?.kind)),
        ).length;
        expect(await page.textContent("#shown")).toBe(`${left} of ${marks} shown`);
      }
      if (file === "barge-in-resume.jsonl") {
        await mkdir(join(process.cwd(), "artifacts"), { recursive: true });
        await page.screenshot({ path: SCREENSHOT, fullPage: true });
      }
      expect(errors).toEqual([]);
      await page.close();
    },
  );

  it("the server serves /sessions and /sessions/:id for a session it ran, with no error", async () => {
    const server = await startTestServer();
    try {
      const client = await RealtimeClient.connect(server.url);
      const id = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
      client.send({ type: "response.create" });
      await client.waitFor("response.done", { since: 0 });
      client.send({ type: "session.close" });
      await client.closed;
      const base = `http://127.0.0.1:${server.port}`;
      const list = await browser.newPage();
      await list.goto(`${base}/sessions`);
      expect(await list.locator(`a[href="/sessions/${id}"]`).count()).toBe(1);
      await list.close();
      const { page, errors } = await open(`${base}/sessions/${id}`);
      expect(await count(page, "responses")).toBe(1);
      expect(await page.locator("#responses .bar.completed").count()).toBe(1);
      expect(errors).toEqual([]);
      await page.close();
      expect((await fetch(`${base}/sessions/sess_nope`)).status).toBe(404);
    } finally {
      await server.stop();
    }
  });
});
