import { describe, expect, it } from "vitest";
import { MAX_TIMER_MS, SessionTimers } from "../../src/engine/timers.ts";
import { virtualClock } from "../support/virtual-clock.ts";

describe("session timers over a virtual clock", () => {
  it("fires an armed timer once it is due, and not before", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    const fired: string[] = [];
    timers.arm("s1", "idle_ttl", 1_000, () => fired.push(`idle@${clock.now()}`));
    timers.arm("s1", "disconnect_grace", 500, () => fired.push(`grace@${clock.now()}`));
    clock.advance(999);
    expect(fired).toEqual(["grace@500"]);
    clock.advance(1);
    expect(fired).toEqual(["grace@500", "idle@1000"]);
  });

  it("re-arming a timer cancels the one armed before; cancel stops it", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    const fired: number[] = [];
    timers.arm("s1", "response_timeout", 100, () => fired.push(1));
    timers.arm("s1", "response_timeout", 300, () => fired.push(2));
    timers.arm("s2", "idle_ttl", 50, () => fired.push(3));
    timers.cancel("s2", "idle_ttl");
    clock.advance(1_000);
    expect(fired).toEqual([2]);
    expect(clock.pending()).toBe(0);
  });

  it("waits longer than MAX_TIMER_MS in parts, and fires once, after the whole wait", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    let calls = 0;
    timers.arm("s1", "idle_ttl", MAX_TIMER_MS * 2 + 5, () => {
      calls += 1;
    });
    clock.advance(MAX_TIMER_MS * 2 + 4);
    expect(calls).toBe(0);
    clock.advance(1);
    expect(calls).toBe(1);
    clock.advance(MAX_TIMER_MS * 3);
    expect(calls).toBe(1);
    expect(clock.pending()).toBe(0);
  });

  it("a long wait cancelled part way never fires", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    let calls = 0;
    timers.arm("s1", "idle_ttl", MAX_TIMER_MS * 2, () => {
      calls += 1;
    });
    clock.advance(MAX_TIMER_MS + 1);
    timers.cancel("s1", "idle_ttl");
    clock.advance(MAX_TIMER_MS * 2);
    expect(calls).toBe(0);
    expect(clock.pending()).toBe(0);
  });

  it("runs a decision's timer effects in order: arm fires its TimerFired data, cancel stops it", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    const fired: unknown[] = [];
    timers.run(
      "s1",
      [
        { kind: "arm_timer", ms: 100, fire: { timer: "response_timeout", progress: "p1" } },
        { kind: "arm_timer", ms: 50, fire: { timer: "idle_ttl" } },
        { kind: "cancel_timer", timer: "idle_ttl" },
      ],
      (data) => fired.push({ data, at: clock.now() }),
    );
    clock.advance(1_000);
    expect(fired).toEqual([{ data: { timer: "response_timeout", progress: "p1" }, at: 100 }]);
  });

  it("cancelAll cancels the named timers of one session only", () => {
    const clock = virtualClock();
    const timers = new SessionTimers(clock);
    const fired: string[] = [];
    timers.arm("s1", "idle_ttl", 10, () => fired.push("s1 idle"));
    timers.arm("s1", "response_timeout", 10, () => fired.push("s1 response"));
    timers.arm("s2", "idle_ttl", 10, () => fired.push("s2 idle"));
    timers.cancelAll("s1", ["idle_ttl", "disconnect_grace"]);
    clock.advance(10);
    expect(fired).toEqual(["s1 response", "s2 idle"]);
  });
});
