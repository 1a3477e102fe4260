import { describe, expect, it } from "vitest";
import { type Input, responseProgressOf, type SessionState } from "../../src/domain/index.ts";
import { type Effect, effectsOf, splitEffects } from "../../src/engine/effects.ts";
import { appendFrames, audio, command, create, given, opened, stage, update } from "../domain/decider-spec.ts";

/**
 * The session timers as effects of a decision (issue 34, part 4; BEHAVIOUR.md, "Defaults and limits"): the response
 * timer follows the active response's progress, the idle timer the session's `idle_timeout_s`; both are derived from
 * the decision alone (pure), after the runner's effects, and the runner is never given them.
 */

/** The effects of deciding `input` on the state `inputs` led to. */
const effectsAfter = (inputs: readonly Input[], input: Input): { effects: Effect[]; after: SessionState } => {
  const spec = given(...inputs).when(input);
  return { effects: effectsOf(input, spec.events, given(...inputs).state, spec.after), after: spec.after };
};

const timersOf = (effects: readonly Effect[]) => splitEffects(effects).timers;

describe("timer effects", () => {
  it("a new session arms its idle timer at idle_timeout_s, in ms", () => {
    const { effects } = effectsAfter([], opened());
    expect(timersOf(effects)).toEqual([{ kind: "arm_timer", ms: 300_000, fire: { timer: "idle_ttl" } }]);
  });

  it("a session.update re-arms the idle timer at its new value, and cancels it for none", () => {
    const longer = effectsAfter([opened()], command(update({ idleTimeoutS: 5 })));
    expect(timersOf(longer.effects)).toEqual([{ kind: "arm_timer", ms: 5_000, fire: { timer: "idle_ttl" } }]);
    const none = effectsAfter([opened()], command(update({ idleTimeoutS: null })));
    expect(timersOf(none.effects)).toEqual([{ kind: "cancel_timer", timer: "idle_ttl" }]);
    // The runner's configure effect comes first, the timer after it.
    expect(none.effects.map((e) => e.kind)).toEqual(["configure", "cancel_timer"]);
  });

  it("a response arms the response timer with its progress; output re-arms it; its end cancels it", () => {
    const started = effectsAfter([opened()], command(create()));
    const progress = responseProgressOf(started.after);
    expect(progress).not.toBeNull();
    expect(started.effects.map((e) => e.kind)).toEqual(["submit", "arm_timer"]);
    expect(timersOf(started.effects)).toEqual([
      { kind: "arm_timer", ms: started.after.config.responseTimeoutMs, fire: { timer: "response_timeout", progress } },
    ]);

    const spoke = effectsAfter([opened(), command(create())], stage(audio(100, "Hi")));
    const moved = responseProgressOf(spoke.after);
    expect(moved).not.toBe(progress);
    expect(timersOf(spoke.effects)).toEqual([
      {
        kind: "arm_timer",
        ms: spoke.after.config.responseTimeoutMs,
        fire: { timer: "response_timeout", progress: moved },
      },
    ]);

    const ended = effectsAfter([opened(), command(create())], stage({ kind: "end_of_turn", epoch: 0 }));
    expect(ended.after.response).toBeNull();
    expect(timersOf(ended.effects)).toEqual([{ kind: "cancel_timer", timer: "response_timeout" }]);
  });

  it("a session.update that changes response_timeout_ms during a response re-arms its timer at the new value", () => {
    const s = effectsAfter([opened(), command(create())], command(update({ responseTimeoutMs: 1_000 })));
    const progress = responseProgressOf(s.after);
    expect(timersOf(s.effects)).toEqual([
      { kind: "arm_timer", ms: 300_000, fire: { timer: "idle_ttl" } },
      { kind: "arm_timer", ms: 1_000, fire: { timer: "response_timeout", progress } },
    ]);
    // Without a response, the new value waits for the next one.
    const idle = effectsAfter([opened()], command(update({ responseTimeoutMs: 1_000 })));
    expect(timersOf(idle.effects)).toEqual([{ kind: "arm_timer", ms: 300_000, fire: { timer: "idle_ttl" } }]);
  });

  it("an input that moves no response and no configuration touches no timer", () => {
    const { effects } = effectsAfter([opened(), command(create())], command(update({ temperature: 0.7 })));
    // The update re-arms the idle timer only; the response made no progress.
    expect(timersOf(effects)).toEqual([{ kind: "arm_timer", ms: 300_000, fire: { timer: "idle_ttl" } }]);
    const quiet = effectsAfter([opened()], stage({ kind: "end_of_turn", epoch: 0 }));
    expect(timersOf(quiet.effects)).toEqual([]);
  });

  it("a session rebuilt from its log arms the timer of the response it starts: its host has none armed yet", () => {
    const recovered: Input = { type: "SessionRecovered", at: 1_000_000, data: { reason: "server_restart" } };
    // R1 speaks; the user's utterance is committed and deferred behind it (server VAD that never interrupts).
    const noInterrupt = command(update({ turnDetection: { type: "server_vad", interruptResponse: false } }));
    const frames = (p: number, n: number) => command(appendFrames(Array.from({ length: n }, () => p)));
    const deferred = [
      opened(),
      noInterrupt,
      command(create()),
      stage(audio(400, "hi")),
      frames(0.9, 10),
      frames(0, 16),
    ];
    const restarted = effectsAfter(deferred, recovered);
    // The restart cancels R1 and starts the deferred R2, which runs while the session waits for its client.
    const progress = responseProgressOf(restarted.after);
    expect(restarted.after.response?.id).toBe("resp_01234567_2");
    expect(timersOf(restarted.effects)).toEqual([
      {
        kind: "arm_timer",
        ms: restarted.after.config.responseTimeoutMs,
        fire: { timer: "response_timeout", progress },
      },
    ]);
    // A rebuilt session with no response: nothing to time out.
    expect(timersOf(effectsAfter([opened()], recovered).effects)).toEqual([]);
    // A restart that only cancels the active response: its rebuilt host armed nothing, so nothing is cancelled.
    const cancelled = effectsAfter([opened(), command(create())], recovered);
    expect(cancelled.after.response).toBeNull();
    expect(timersOf(cancelled.effects)).toEqual([]);
  });

  it("a session with max_session_lifetime_s arms its lifetime timer when created, and for what is left when rebuilt", () => {
    const base = opened();
    const limited = {
      ...base,
      data: { ...(base as Extract<Input, { type: "SessionOpened" }>).data, maxLifetimeS: 60 },
    } as Input;
    const created = effectsAfter([], limited);
    expect(created.after.lifetimeEndsAt).toBe(limited.at + 60_000);
    expect(timersOf(created.effects)).toEqual([
      { kind: "arm_timer", ms: 300_000, fire: { timer: "idle_ttl" } },
      { kind: "arm_timer", ms: 60_000, fire: { timer: "max_lifetime" } },
    ]);
    // Any later input leaves it as armed: activity does not extend a lifetime.
    expect(
      timersOf(effectsAfter([limited], command(create())).effects).map((t) => t.kind === "arm_timer" && t.fire.timer),
    ).toEqual(["response_timeout"]);
    const recovered: Input = { type: "SessionRecovered", at: limited.at + 45_000, data: { reason: "server_restart" } };
    expect(timersOf(effectsAfter([limited], recovered).effects)).toContainEqual({
      kind: "arm_timer",
      ms: 15_000,
      fire: { timer: "max_lifetime" },
    });
    // Rebuilt after its lifetime ran out while no node served it: it fires at once.
    const late: Input = { type: "SessionOwned", at: limited.at + 90_000, data: { node: "node-2", epoch: 2 } };
    expect(timersOf(effectsAfter([limited], late).effects)).toContainEqual({
      kind: "arm_timer",
      ms: 0,
      fire: { timer: "max_lifetime" },
    });
    // Without the limit, no lifetime timer at all.
    expect(
      timersOf(effectsAfter([], opened()).effects).some(
        (t) => t.kind === "arm_timer" && t.fire.timer === "max_lifetime",
      ),
    ).toBe(false);
  });
});
