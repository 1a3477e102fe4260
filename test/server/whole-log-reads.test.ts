import type { FastifyReply, FastifyRequest } from "fastify";
import { describe, expect, it } from "vitest";
import { foldsWholeLogs, WHOLE_LOG_QUEUE } from "../../src/server/sessions-api.ts";

/** A reply that records what was sent (status, headers, body). */
const fakeReply = () => {
  const sent: { status: number; headers: Record<string, string>; body: unknown } = {
    status: 200,
    headers: {},
    body: null,
  };
  const reply = {
    code(status: number) {
      sent.status = status;
      return reply;
    },
    header(name: string, value: string) {
      sent.headers[name] = value;
      return reply;
    },
    send(body: unknown) {
      sent.body = body;
      return reply;
    },
  };
  return { reply: reply as unknown as FastifyReply, sent };
};

describe("requests that read a whole log", () => {
  it("run at most two at a time, the next 32 wait in arrival order, and one more is refused with 429 at once", async () => {
    const whole = foldsWholeLogs(2);
    let running = 0;
    let most = 0;
    const order: number[] = [];
    const gates: (() => void)[] = [];
    const handler = whole(async (request: FastifyRequest) => {
      running += 1;
      most = Math.max(most, running);
      order.push(Number(request.id));
      await new Promise<void>((resolve) => gates.push(resolve));
      running -= 1;
      return "done";
    });
    const total = 2 + WHOLE_LOG_QUEUE + 1;
    const replies = Array.from({ length: total }, () => fakeReply());
    const calls = replies.map(({ reply }, i) => handler({ id: String(i) } as FastifyRequest, reply));
    await new Promise((resolve) => setTimeout(resolve, 10));
    // The last one found both places taken and the queue full.
    expect(replies[total - 1]?.sent.status).toBe(429);
    expect(replies[total - 1]?.sent.headers["retry-after"]).toBe("1");
    expect(replies[total - 1]?.sent.body).toMatchObject({ error: { code: "resource_exhausted" } });
    expect(running).toBe(2);
    while (order.length < total - 1 || gates.length > 0) {
      gates.shift()?.();
      await new Promise((resolve) => setTimeout(resolve, 1));
    }
    expect(await Promise.all(calls.slice(0, total - 1))).toEqual(Array(total - 1).fill("done"));
    expect(most).toBe(2);
    expect(order).toEqual(Array.from({ length: total - 1 }, (_, i) => i));
    // All places free again: the next one runs at once.
    const after = fakeReply();
    const next = handler({ id: "99" } as FastifyRequest, after.reply);
    await new Promise((resolve) => setTimeout(resolve, 1));
    expect(running).toBe(1);
    gates.shift()?.();
    expect(await next).toBe("done");
  });
});
