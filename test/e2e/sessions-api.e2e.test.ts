import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { streamOf } from "../../src/engine/index.ts";
import { readWav, readWavFile } from "../../src/infra/audio/index.ts";
import { parseSessionFile, renderEntryLine } from "../../src/infra/event-store/index.ts";
import { replayEntries, reportOf, timelineOf } from "../../src/replay/index.ts";
import { sharedAudio, startTestServer } from "../support/server.ts";
import { reportRowOf } from "../support/session-list-reference.ts";

/**
 * The session API (issue 20, part 2) over real sessions of a real server: the list with its cursor and filters,
 * one session's report, its export, and its log as server-sent events, live, with a reconnect that resumes from
 * Last-Event-ID while the session keeps appending.
 */
type Server = Awaited<ReturnType<typeof startTestServer>>;

interface Sse {
  readonly event: string;
  readonly id: string | null;
  readonly data: string;
}

/** Reads server-sent events from `response` until `until` says stop or the stream ends; the reader is released. */
const readSse = async (response: Response, until: (events: Sse[]) => boolean = () => false): Promise<Sse[]> => {
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const decoder = new TextDecoder();
  const events: Sse[] = [];
  let buffer = "";
  for (;;) {
    if (until(events)) {
      await reader.cancel();
      return events;
    }
    const { done, value } = await reader.read();
    if (done) return events;
    buffer += decoder.decode(value, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      end = buffer.indexOf("\n\n");
      if (block.startsWith(":")) continue;
      const field = (name: string) =>
        block
          .split("\n")
          .find((l) => l.startsWith(`${name}: `))
          ?.slice(name.length + 2) ?? null;
      events.push({ event: field("event") ?? "message", id: field("id"), data: field("data") ?? "" });
    }
  }
};

const idOf = async (client: RealtimeClient): Promise<string> =>
  String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);

describe("the session API", () => {
  let server: Server;
  let base = "";
  const ids: Record<string, string> = {};
  beforeAll(async () => {
    server = await startTestServer();
    base = `http://127.0.0.1:${server.port}/v1/sessions`;
    const closed = await RealtimeClient.connect(server.url);
    ids.closed = await idOf(closed);
    closed.send({ type: "response.create", response: { instructions: "Answer." } });
    await closed.waitFor("response.done", { since: 0 });
    closed.send({ type: "session.close" });
    await closed.closed;
    const failing = await RealtimeClient.connect(server.url);
    ids.failing = await idOf(failing);
    failing.send({ type: "conversation.item.truncate", item_id: "item_nope", content_index: 0, audio_end_ms: 10 });
    await failing.waitFor("error", { since: 0 });
    failing.send({ type: "session.close" });
    await failing.closed;
  });
  afterAll(async () => server.stop());

  it("lists the sessions oldest first, pages them with a cursor, and filters by state and error code", async () => {
    const all = (await (await fetch(base)).json()) as { object: string; data: { id: string }[]; has_more: boolean };
    expect(all).toMatchObject({ object: "list", has_more: false, next_cursor: null });
    expect(all.data.map((s) => s.id)).toEqual([ids.closed, ids.failing]);
    expect(all.data[0]).toMatchObject({ object: "duplex.session", state: "closed", live: false, responses: 1 });
    expect(all.data[1]).toMatchObject({ error_codes: ["item_not_found"] });
    // Each row is the store's summary of the session, and the same as a fold of its whole log (reportOf) gives.
    for (const row of all.data) {
      const { object: _, live: __, ...summary } = row as typeof row & { object: string; live: boolean };
      expect(summary).toEqual(reportRowOf(await server.store.read(streamOf(row.id))));
    }
    const page1 = (await (await fetch(`${base}?limit=1`)).json()) as { data: { id: string }[]; next_cursor: string };
    expect(page1.data.map((s) => s.id)).toEqual([ids.closed]);
    const page2 = (await (await fetch(`${base}?limit=1&after=${page1.next_cursor}`)).json()) as {
      data: { id: string }[];
      has_more: boolean;
    };
    expect(page2).toMatchObject({ has_more: false });
    expect(page2.data.map((s) => s.id)).toEqual([ids.failing]);
    const newest = (await (await fetch(`${base}?order=desc&limit=1`)).json()) as {
      data: { id: string }[];
      next_cursor: string;
    };
    expect(newest.data.map((s) => s.id)).toEqual([ids.failing]);
    const older = (await (await fetch(`${base}?order=desc&limit=1&after=${newest.next_cursor}`)).json()) as {
      data: { id: string }[];
    };
    expect(older.data.map((s) => s.id)).toEqual([ids.closed]);
    const failing = (await (await fetch(`${base}?error=item_not_found`)).json()) as { data: { id: string }[] };
    expect(failing.data.map((s) => s.id)).toEqual([ids.failing]);
    const open = (await (await fetch(`${base}?state=open`)).json()) as { data: unknown[] };
    expect(open.data).toEqual([]);
    const bad = await fetch(`${base}?after=nonsense`);
    expect(bad.status).toBe(400);
    expect(await bad.json()).toMatchObject({
      error: { code: "bad_event", message: "after: not a cursor this server gave" },
    });
  });

  it("shows one session as its log tells it, exports it as a file that replays, and 404s an unknown id", async () => {
    const id = ids.closed ?? "";
    const response = await fetch(`${base}/${id}`);
    const text = await response.text();
    const entries = await server.store.read(streamOf(id));
    expect(JSON.parse(text)).toEqual({ ...JSON.parse(JSON.stringify(reportOf(entries))), live: false });
    // Only the resume token's SHA-256 is in the log; the token itself is never served.
    expect(text).not.toMatch(/"resume_token"/);
    const exported = await fetch(`${base}/${id}/export`);
    expect(exported.headers.get("content-type")).toMatch(/^application\/x-ndjson/);
    const file = parseSessionFile(await exported.text());
    expect(file.entries.map((e) => e.revision)).toEqual(entries.map((e) => e.revision));
    expect(replayEntries(file.entries)).toMatchObject({ ok: true, sessionId: id });
    const missing = await fetch(`${base}/sess_nope`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: "unknown_session", type: "invalid_request_error" } });
    expect((await fetch(`${base}/sess_nope/events`)).status).toBe(404);
  });

  it("serves what the model heard (input.wav) and each response's audio (responses/ID.wav) from the log", async () => {
    const question = await readWavFile(sharedAudio("question_16k.wav"));
    const client = await RealtimeClient.connect(server.url);
    const id = await idOf(client);
    client.send({ type: "session.update", session: { input_audio_format: "pcm16", input_sample_rate_hz: 16000 } });
    await client.waitFor("session.updated", { since: 0 });
    client.appendSamples(question.samples, { sampleRateHz: 16000, tailMs: 1000 });
    const done = await client.waitFor("response.done", { since: 0, timeoutMs: 20_000 });
    const responseId = String((done.response as { id: string }).id);
    const sent = client.received
      .filter((r) => r.event.type === "response.output_audio.delta")
      .reduce((n, r) => n + Buffer.from(String(r.event.delta), "base64").length, 0);
    client.send({ type: "session.close" });
    await client.closed;
    const input = await fetch(`${base}/${id}/input.wav`);
    expect(input.headers.get("content-type")).toBe("audio/wav");
    const heard = readWav(new Uint8Array(await input.arrayBuffer()));
    // The echo's model hears 16 kHz: the question and its second of silence, resampled 16 -> 16 kHz as sent.
    expect(heard.sampleRate).toBe(16000);
    expect(heard.samples.length).toBe(question.samples.length + 16000);
    expect(heard.samples.subarray(0, 1000)).toEqual(question.samples.subarray(0, 1000));
    const answer = readWav(
      new Uint8Array(await (await fetch(`${base}/${id}/responses/${responseId}.wav`)).arrayBuffer()),
    );
    expect(answer.sampleRate).toBe(24000);
    expect(answer.samples.length * 2).toBe(sent);
    // The timeline's data, computed by the server from the log: the response's peaks among it.
    const timeline = (await (await fetch(`${base}/${id}/timeline.json`)).json()) as {
      responses: { id: string; peaks: number[] }[];
    };
    expect(timeline).toEqual(JSON.parse(JSON.stringify(timelineOf(await server.store.read(streamOf(id))))));
    expect(timeline.responses.find((r) => r.id === responseId)?.peaks.length).toBe(
      2 * Math.ceil(answer.samples.length / 480),
    );
    const missing = await fetch(`${base}/${id}/responses/resp_nope.wav`);
    expect(missing.status).toBe(404);
    expect(await missing.json()).toMatchObject({ error: { code: "response_not_found" } });
  });

  it("streams a finished session's log as one event per entry, id = revision, and ends", async () => {
    const id = ids.failing ?? "";
    const events = await readSse(await fetch(`${base}/${id}/events`));
    const entries = await server.store.read(streamOf(id));
    expect(events.map((e) => e.event)).toEqual(entries.map(() => "entry"));
    expect(events.map((e) => e.id)).toEqual(entries.map((e) => String(e.revision)));
    expect(events.map((e) => e.data)).toEqual(entries.map(renderEntryLine));
  });

  it("tails a live session: its log, caught_up, then live entries; a reconnect with Last-Event-ID misses and repeats nothing", async () => {
    const client = await RealtimeClient.connect(server.url);
    const id = await idOf(client);
    const first = await fetch(`${base}/${id}/events`);
    const before = await readSse(first, (events) => events.some((e) => e.event === "caught_up"));
    expect(before.at(-1)?.event).toBe("caught_up");
    // Live: the session appends while the tail is held, and again while it is away.
    client.send({ type: "session.update", session: { instructions: "one" } });
    await client.waitFor("session.updated", { since: 0 });
    const second = await fetch(`${base}/${id}/events`, {
      headers: { "Last-Event-ID": String(before.filter((e) => e.event === "entry").at(-1)?.id) },
    });
    const lastSeen = before.filter((e) => e.event === "entry").at(-1)?.id;
    const resumed = readSse(second);
    client.send({ type: "session.update", session: { instructions: "two" } });
    await client.waitFor(
      (e) => e.type === "session.updated" && (e.session as { instructions?: string }).instructions === "two",
      { since: 0 },
    );
    client.send({ type: "session.close" });
    await client.closed;
    const after = await resumed;
    const entries = await server.store.read(streamOf(id));
    const seen = [...before, ...after].filter((e) => e.event === "entry");
    // Every revision once, in order, from 0 to the SessionClosed that ended the tail.
    expect(seen.map((e) => e.id)).toEqual(entries.map((e) => String(e.revision)));
    expect(seen.map((e) => e.data)).toEqual(entries.map(renderEntryLine));
    expect(after[0]?.id).toBe(String(Number(lastSeen) + 1));
    expect(entries.at(-1)?.type).toBe("SessionClosed");
  });
});

describe("the session API behind keys", () => {
  it("needs a key like every /v1 route", async () => {
    const server = await startTestServer({ auth: { api_keys: ["sk-right"] } });
    try {
      const base = `http://127.0.0.1:${server.port}/v1/sessions`;
      expect((await fetch(base)).status).toBe(401);
      const ok = await fetch(base, { headers: { Authorization: "Bearer sk-right" } });
      expect(ok.status).toBe(200);
      expect(await ok.json()).toMatchObject({ object: "list", data: [] });
    } finally {
      await server.stop();
    }
  });
});
