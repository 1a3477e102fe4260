import { describe, expect, it } from "vitest";
import { parseScript } from "../../src/infra/runners/script.ts";
import { createScriptedRunner } from "../../src/infra/runners/scripted.ts";
import { replayEntries } from "../../src/replay/index.ts";
import { openEngineSession } from "../support/engine-session.ts";
import { virtualClock } from "../support/virtual-clock.ts";

/**
 * A session's timers on a virtual clock (BEHAVIOUR.md, "Defaults and limits"; issue 34, part 4): the decisions arm
 * and cancel them as effects, the engine runs them over its injected scheduler, and time moves only when the test
 * says. In process, with the scripted runner: a stalled model's response ends failed with `response_timeout` at
 * `response_timeout_ms` and not before, the next turn works; an idle session ends at `idle_timeout_s`, and a client
 * event in between re-arms it.
 */

/** R1 opens a response and then produces nothing (its wait is real time and never ends); R2 answers. */
const STALL = parseScript(
  [
    "name: stall",
    "turns:",
    "  - on: respond",
    "    actions: [{ wait_ms: 600000 }, end_turn]",
    "  - on: respond",
    '    actions: [{ speak: "Back again." }, end_turn]',
  ].join("\n"),
  "stall.yaml",
);

const QUIET = parseScript(
  "name: quiet\nwhen_exhausted: repeat_last\nturns:\n  - on: respond\n    actions: [end_turn]\n",
  "quiet.yaml",
);

/** Lets the session's mailbox decide what is queued (appends are asynchronous) without moving the virtual clock. */
const settle = async (): Promise<void> => {
  for (let i = 0; i < 5; i += 1) await new Promise((resolve) => setImmediate(resolve));
};

describe("session timers on a virtual clock", () => {
  it("a response with no model output ends failed at response_timeout_ms, not before, and the next turn works", async () => {
    const clock = virtualClock(1_700_000_000_000);
    const s = await openEngineSession({ runner: createScriptedRunner(STALL, { speedFactor: 100 }), clock });
    try {
      await s.send({
        type: "session.update",
        session: { instructions: "Answer.", extra_body: { response_timeout_ms: 400 } },
      });
      const updated = await s.waitFor("session.updated");
      expect(updated.session).toMatchObject({ extra_body: { response_timeout_ms: 400 } });
      await s.send({ type: "response.create" });
      await s.waitFor("response.created");
      await settle();
      clock.advance(399);
      await settle();
      expect(s.types()).not.toContain("response.done");
      clock.advance(1);
      const done = await s.waitFor("response.done");
      expect(done.response).toMatchObject({
        status: "failed",
        status_details: { reason: "response_timeout", error: { code: "response_timeout" } },
      });
      const since = s.sent.length;
      await s.send({ type: "response.create" });
      const transcript = await s.waitFor("response.output_audio_transcript.done", { since });
      expect(transcript.transcript).toBe("Back again.");
      const second = await s.waitFor("response.done", { since });
      expect(second.response).toMatchObject({ status: "completed" });
      // The second response ended: its timer is cancelled, and no time makes it fail afterwards.
      clock.advance(10_000);
      await settle();
      expect(s.sent.slice(since).filter((e) => e.type === "response.done")).toHaveLength(1);
      expect(replayEntries(await s.log()).ok).toBe(true);
    } finally {
      await s.close();
    }
  });

  it("an idle session ends at idle_timeout_s; a client event in between re-arms the timer", async () => {
    const clock = virtualClock(1_700_000_000_000);
    const s = await openEngineSession({ runner: createScriptedRunner(QUIET), clock });
    try {
      await s.send({ type: "session.update", session: { idle_timeout_s: 5 } });
      await s.waitFor("session.updated");
      await settle();
      clock.advance(3_000);
      await s.send({ type: "input_audio_buffer.clear" });
      await settle();
      clock.advance(4_999);
      await settle();
      expect(s.host.isClosed).toBe(false);
      clock.advance(1);
      const expired = await s.waitFor("session.expired");
      expect(expired).toMatchObject({ reason: "idle_ttl_expired" });
      const log = await s.log();
      const fired = log.filter((e) => e.type === "TimerFired");
      expect(fired.map((e) => [e.data, e.metadata.at])).toEqual([[{ timer: "idle_ttl" }, 1_700_000_008_000]]);
      expect(replayEntries(log).ok).toBe(true);
    } finally {
      await s.close();
    }
  });

  it("idle_timeout_s set to none leaves the session open however long it waits", async () => {
    const clock = virtualClock(1_700_000_000_000);
    const s = await openEngineSession({ runner: createScriptedRunner(QUIET), clock });
    try {
      await s.send({ type: "session.update", session: { idle_timeout_s: null } });
      await s.waitFor("session.updated");
      await settle();
      clock.advance(7 * 24 * 3600 * 1000);
      await settle();
      expect(s.host.isClosed).toBe(false);
      expect(s.types()).not.toContain("session.expired");
    } finally {
      await s.close();
    }
  });

  it("max_session_lifetime_s ends a busy session at its lifetime, with its own reason, whatever its activity", async () => {
    const clock = virtualClock(1_700_000_000_000);
    const s = await openEngineSession({
      runner: createScriptedRunner(QUIET),
      clock,
      config: { duplex_session: { max_session_lifetime_s: 10 } },
    });
    try {
      await s.send({ type: "session.update", session: { instructions: "Answer.", idle_timeout_s: null } });
      await s.waitFor("session.updated");
      await settle();
      // Busy all along: a client event every 2 s.
      for (let t = 0; t < 4; t += 1) {
        clock.advance(2_000);
        await s.send({ type: "input_audio_buffer.clear" });
        await settle();
      }
      clock.advance(1_999);
      await settle();
      expect(s.host.isClosed).toBe(false);
      clock.advance(1);
      const expired = await s.waitFor("session.expired");
      expect(expired).toMatchObject({ type: "session.expired", reason: "max_lifetime_expired" });
      expect(s.types().filter((t) => t === "session.expired" || t === "session.closed")).toEqual(["session.expired"]);
      const log = await s.log();
      const fired = log.filter((e) => e.type === "TimerFired");
      expect(fired.map((e) => [e.data, e.metadata.at])).toEqual([[{ timer: "max_lifetime" }, 1_700_000_010_000]]);
      expect(log.at(-1)).toMatchObject({ type: "SessionClosed", data: { reason: "max_lifetime_expired" } });
      expect(replayEntries(log).ok).toBe(true);
    } finally {
      await s.close();
    }
  });
});
