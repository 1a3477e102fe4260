import { afterEach, beforeEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ServerEvent } from "../../src/client/index.ts";
import type { SessionState } from "../../src/domain/index.ts";
import { MAX_FRAME_BYTES } from "../../src/protocol/index.ts";
import { WS_MAX_MESSAGE_BYTES } from "../../src/server/realtime/routes.ts";
import { connectRaw, type Peer } from "../support/raw-socket.ts";
import { startTestServer } from "../support/server.ts";

/**
 * The frame size limit end to end (BEHAVIOUR.md, "Defaults and limits": max frame 15 MiB, `event_too_large`;
 * issue 10, part 6), and binary frames. A frame over 15 MiB is refused with `event_too_large` echoing its event_id
 * and the session goes on; a message past what the WebSocket layer reads at all (17 MiB, its fragments together)
 * closes the socket with 1009 the moment it passes, and the session is detached as after a drop: resumable, not lost. A binary frame is refused with `invalid_json`
 * that echoes the event_id its bytes carry. (A 16 MiB frame among other bad frames is scenario 2, scenarios.e2e.)
 */

/** The WebSocket layer's maxPayload (src/server/app.ts): a whole message, all its fragments. */
const WS_MAX_PAYLOAD = WS_MAX_MESSAGE_BYTES;

/** A text frame of exactly `bytes` bytes: `{"event_id":ID,"type":TYPE,"audio":"AAAA..."}`. */
const frameOf = (eventId: string, type: string, bytes: number): string => {
  const head = `{"event_id":"${eventId}","type":"${type}","audio":"`;
  const text = `${head}${"A".repeat(bytes - head.length - 2)}"}`;
  expect(Buffer.byteLength(text)).toBe(bytes);
  return text;
};

const until = async (what: string, test: () => boolean, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!test()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

/** What a refused frame must leave as it was. */
const slice = (s: SessionState | undefined) => ({
  phase: s?.phase,
  epoch: s?.epoch,
  turnState: s?.turnState,
  input: s?.input,
  config: s?.config,
  history: s?.history,
  response: s?.response,
  attached: s?.attached,
});

describe("frame size limits and binary frames", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let peer: Peer;
  let sessionId: string;
  let token: string;
  beforeEach(async () => {
    server = await startTestServer();
    peer = await connectRaw(server.url);
    const created = await peer.waitFor((e) => e.type === "session.created", 0);
    sessionId = String((created.session as { id: string }).id);
    token = String(created.resume_token);
    peer.ws.send(JSON.stringify({ type: "session.update", event_id: "open", session: {} }));
    await peer.waitFor((e) => e.type === "session.updated", 0);
  });
  afterEach(async () => {
    if (peer.ws.readyState === WebSocket.OPEN) peer.ws.close();
    await server.stop();
  });

  /** Sends `frames`, then a heartbeat; returns what came back up to its ack, as received. */
  const exchange = async (...frames: (string | Buffer)[]): Promise<ServerEvent[]> => {
    const since = peer.received.length;
    for (const frame of frames) peer.ws.send(frame);
    peer.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "after" }));
    await peer.waitFor((e) => e.type === "session.heartbeat_ack", since);
    return peer.received.slice(since);
  };

  it("refuses a frame of 15 MiB + 1 byte with event_too_large echoing its event_id; one of exactly 15 MiB is read; the session goes on unchanged", async () => {
    const before = slice(server.engine.get(sessionId)?.current);
    const events = await exchange(
      frameOf("evt_over", "input_audio_buffer.append", MAX_FRAME_BYTES + 1),
      frameOf("evt_at", "fuzz.unknown", MAX_FRAME_BYTES),
    );
    expect(events.map((e) => e.type)).toEqual(["error", "error", "session.heartbeat_ack"]);
    expect(events[0]?.error).toEqual({
      type: "invalid_request_error",
      code: "event_too_large",
      message: `frame of ${MAX_FRAME_BYTES + 1} bytes exceeds the maximum of ${MAX_FRAME_BYTES} bytes`,
      event_id: "evt_over",
      param: null,
    });
    // At the limit the frame is parsed: its type is what is wrong with it.
    expect(events[1]?.error).toMatchObject({ code: "unknown_event", event_id: "evt_at" });
    expect(slice(server.engine.get(sessionId)?.current)).toEqual(before);
    expect(peer.ws.readyState).toBe(WebSocket.OPEN);
  });

  it("refuses binary frames with invalid_json echoing the event_id their bytes carry, and null when they carry none", async () => {
    const before = slice(server.engine.get(sessionId)?.current);
    const append = { type: "input_audio_buffer.append", audio: "AAAA" };
    const events = await exchange(
      Buffer.from(JSON.stringify({ event_id: "evt_bin", ...append })),
      Buffer.from(JSON.stringify({ ...append, event_id: "evt_bin_last" })),
      Buffer.from([0xff, 0x00, 0x7b]),
      Buffer.from(frameOf("evt_bin_big", "input_audio_buffer.append", MAX_FRAME_BYTES + 1)),
    );
    expect(events.map((e) => e.type)).toEqual(["error", "error", "error", "error", "session.heartbeat_ack"]);
    expect(events.slice(0, 4).map((e) => e.error)).toEqual(
      ["evt_bin", "evt_bin_last", null, "evt_bin_big"].map((eventId) => ({
        type: "invalid_request_error",
        code: "invalid_json",
        message: "binary frames are not accepted; send one JSON object per text frame",
        event_id: eventId,
        param: null,
      })),
    );
    // Refused, not accepted: nothing was buffered.
    expect(slice(server.engine.get(sessionId)?.current)).toEqual(before);
  });

  it("closes the socket with 1009 on a message sent as fragments that never end, once they pass the limit", async () => {
    const since = peer.received.length;
    // 1 MiB fragments of one text message, never a final one: the server must cut it, not keep buffering.
    const chunk = "A".repeat(1024 * 1024);
    let sent = 0;
    for (; sent < 40 && peer.ws.readyState === WebSocket.OPEN; sent += 1) {
      peer.ws.send(chunk, { fin: false });
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    const closed = await peer.closed;
    expect(closed.code).toBe(1009);
    expect(peer.received.slice(since)).toEqual([]);
    const host = server.engine.get(sessionId);
    await until("the session's detach", () => host?.current.attached === false);
    expect(host?.isClosed).toBe(false);
  });

  it("closes the socket with 1009 on a frame past the WebSocket layer's 17 MiB, and the session is detached, then resumed", async () => {
    const lastSeq = Math.max(...peer.received.map((e) => Number(e.server_event_seq ?? 0)));
    const since = peer.received.length;
    peer.ws.send(frameOf("evt_huge", "input_audio_buffer.append", WS_MAX_PAYLOAD + 1));
    const closed = await peer.closed;
    expect(closed.code).toBe(1009);
    // The frame never reached the session: no answer, nothing decided of it.
    expect(peer.received.slice(since)).toEqual([]);

    const host = server.engine.get(sessionId);
    await until("the session's detach", () => host?.current.attached === false);
    expect(host?.isClosed).toBe(false);
    expect(host?.current.phase).toBe("open");

    const resumed = await connectRaw(`${server.url}?autostart=0`);
    resumed.ws.send(
      JSON.stringify({
        type: "session.resume",
        session_id: sessionId,
        resume_token: token,
        last_received_server_event_seq: lastSeq,
      }),
    );
    await resumed.waitFor((e) => e.type === "session.resumed", 0);
    resumed.ws.send(JSON.stringify({ type: "session.heartbeat", event_id: "back" }));
    await resumed.waitFor((e) => e.type === "session.heartbeat_ack", 0);
    const events = resumed.received;
    expect(events.map((e) => e.type)).toEqual(["session.resumed", "session.heartbeat_ack"]);
    expect(events[0]).toMatchObject({ session_id: sessionId, attachment_generation: 2 });
    // Nothing was missed while detached, and the seqs go on from the last one the first socket received.
    expect(events[1]?.server_event_seq).toBe(lastSeq + 1);
    expect(host?.current.attached).toBe(true);
    resumed.ws.close();
    await resumed.closed;
  });
});
