import type { SessionConfig } from "../../src/domain/index.ts";
import type { NodeLeases, SessionSink } from "../../src/engine/index.ts";
import { type DecodedFrame, decodeClientFrame } from "../../src/protocol/index.ts";

/**
 * Driving a session host in process, without a socket (the tests of moves, takeovers, restarts and the upstream
 * runner): client frames decoded as the socket decodes them, a sink that records what the client would be sent, and
 * a wait for a condition.
 */

/** A server event as the client would receive it (parsed JSON). */
export type Sent = Record<string, unknown>;

/** `event` as a frame for `SessionHost.submit`, decoded against the session's configuration when it is submitted. */
export const frame =
  (event: Record<string, unknown>) =>
  (config: SessionConfig): DecodedFrame => {
    const text = JSON.stringify(event);
    return decodeClientFrame(text, Buffer.byteLength(text), {
      inputRateHz: config.inputAudio.rate,
      inputAudio: config.inputAudio,
    });
  };

/** A sink that pushes every event sent into `sent`, and ignores the rest. */
export const sinkInto = (sent: Sent[]): SessionSink => ({
  send: (json) => sent.push(JSON.parse(json) as Sent),
  replaced: () => undefined,
  failed: () => undefined,
  ended: () => undefined,
});

/**
 * Waits until `check` holds, polled every 5 ms; rejects naming `what` after `ms` (a hang, not a timing: nothing is
 * asserted about how long it took).
 */
export const until = async (check: () => boolean, what: string, ms = 10_000): Promise<void> => {
  const end = Date.now() + ms;
  while (!check()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
};

/**
 * Leases of nodes that are all alive (two engines over one store: a takeover happens on a resume, never by expiry):
 * `node`'s lease is always held, and so is every other node's.
 */
export const leasesAlwaysHeld = (node: string): NodeLeases => ({
  nodeId: node,
  leaseMs: 10_000,
  renew: async () => true,
  claim: async () => {},
  holds: async () => true,
  release: async () => {},
});
