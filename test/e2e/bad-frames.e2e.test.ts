import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { CLIENT_EVENTS } from "../../src/protocol/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * Bad frames of every client event type of the catalogue get their error code, echo the event_id, and leave the
 * session unchanged and going (BEHAVIOUR.md, "Errors"; issue: "bad frames of every event type").
 */
const BAD: Record<string, { frame: Record<string, unknown>; code: string }> = {
  "session.update": { frame: { session: { turn_detection: { type: 42 } } }, code: "bad_event" },
  "session.heartbeat": { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  "session.event_ack": { frame: { server_event_seq: -1 }, code: "bad_event" },
  "session.close": { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  "session.resume": { frame: { session_id: "sess_x", resume_token: "t" }, code: "invalid_session_resume" },
  "input_audio_buffer.append": { frame: { audio: "AAA" }, code: "bad_audio" },
  "input_audio_buffer.commit": { frame: { response_create: "yes" }, code: "bad_event" },
  "input.commit": { frame: { final: "yes" }, code: "bad_event" },
  "input_audio_buffer.clear": { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  "input.cancel": { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  "input.text.append": { frame: { text: 7 }, code: "bad_event" },
  "conversation.item.create": { frame: { item: { type: "message", content: [] } }, code: "bad_event" },
  "conversation.item.retrieve": { frame: {}, code: "missing_item_id" },
  "conversation.item.delete": { frame: { item_id: "item_nope" }, code: "item_not_found" },
  "conversation.item.truncate": { frame: { item_id: "item_nope", audio_end_ms: -5 }, code: "bad_event" },
  "response.create": { frame: { response: { modalities: ["smell"] } }, code: "bad_event" },
  "response.cancel": { frame: { response_id: 5 }, code: "bad_event" },
  "output_audio_buffer.clear": { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  barge_in: { frame: { event_id: "x".repeat(600) }, code: "bad_event" },
  "turn.signal": { frame: { event: "" }, code: "bad_event" },
  "playback.ack": { frame: { played_ms: "soon" }, code: "bad_event" },
};

describe("bad frames of every client event type", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let client: RealtimeClient;
  let sessionId: string;
  beforeAll(async () => {
    server = await startTestServer();
    client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: {} });
    const created = await client.waitFor("session.created", { since: 0 });
    sessionId = String((created.session as { id: string }).id);
    await client.waitFor("session.updated", { since: 0 });
  });
  afterAll(async () => {
    await client.close();
    await server.stop();
  });

  it("has a bad frame for each of the 21 client events", () => {
    expect(Object.keys(BAD).sort()).toEqual(CLIENT_EVENTS.map((e) => e.type).sort());
  });

  it.each(Object.entries(BAD))("%s: a bad frame gets its code and changes nothing", async (type, { frame, code }) => {
    const before = server.engine.get(sessionId)?.current;
    const since = client.received.length;
    const eventId = typeof frame.event_id === "string" ? null : `bad_${type}`;
    client.sendRaw(JSON.stringify({ type, ...(eventId === null ? {} : { event_id: eventId }), ...frame }));
    client.send({ type: "session.heartbeat", event_id: `hb_${type}` });
    await client.waitFor("session.heartbeat_ack", { since });
    const events = client.received.slice(since).map((r) => r.event);
    expect(events.map((e) => e.type)).toEqual(["error", "session.heartbeat_ack"]);
    // An over-long event_id is itself what is wrong with the frame; it is still echoed.
    expect(events[0]?.error).toMatchObject({ code, event_id: eventId ?? frame.event_id });
    const after = server.engine.get(sessionId)?.current;
    expect(after?.phase).toBe("open");
    expect(after?.epoch).toBe(before?.epoch);
    expect(after?.input).toEqual(before?.input);
    expect(after?.config).toEqual(before?.config);
    expect(after?.history).toEqual(before?.history);
    expect(after?.response).toEqual(before?.response);
  });
});
