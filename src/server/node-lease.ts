import type { Logger } from "pino";
import { type AdmissionRefusal, type Engine, NodeIdInUseError, type NodeLeases } from "../engine/index.ts";
import type { ServerMetrics } from "./metrics.ts";

/**
 * A node's part in a cluster (issue 22, part 4): renews its lease every third of it, and takes over, every half of
 * it, the open sessions of nodes whose lease ran out. A lease found expired (this node was paused past it) or not
 * renewed for a whole lease (the store out of reach) gives up every session held here: another node may own them
 * now, and their clients resume there.
 */
export const keepNodeLease = (
  engine: Engine,
  leases: NodeLeases,
  metrics: ServerMetrics,
  log: Logger,
): { healthy(): boolean; refusal(): AdmissionRefusal | null; stop(): void } => {
  let lastHeld = Date.now();
  let lost = false;
  /** Another process holds this node id now: this one serves nothing again (unhealthy, opens nothing, stops). */
  let displaced = false;
  const giveUp = (why: string): void => {
    const held = engine.sessions().filter((h) => !h.isClosed).length;
    log.error({ node: leases.nodeId, sessions: held }, `${why}: every session here is given up to the other nodes`);
    engine.relinquishAll(`${why}: resume the session to reach the node that holds it now`);
  };
  /** A renewal that takes longer than a third of the lease counts as failed: the store is out of reach. */
  const renewWithin = (ms: number): Promise<boolean> =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no answer from the event store within ${ms} ms`)), ms);
      leases.renew().then(
        (held) => {
          clearTimeout(timer);
          resolve(held);
        },
        (error: unknown) => {
          clearTimeout(timer);
          reject(error);
        },
      );
    });
  let renewing = false;
  const renew = async (): Promise<void> => {
    if (renewing) return;
    renewing = true;
    try {
      const held = await renewWithin(Math.max(50, leases.leaseMs / 3));
      metrics.leaseRenewed(held ? "held" : "expired");
      if (!held && !lost) giveUp("this node's lease had expired");
      lastHeld = Date.now();
      lost = false;
    } catch (error) {
      metrics.leaseRenewed("failed");
      if (error instanceof NodeIdInUseError) {
        if (displaced) return;
        displaced = true;
        lost = true;
        clearInterval(renewer);
        clearInterval(sweeper);
        giveUp(`another process took this node's id (${leases.nodeId}) while its lease had run out; stop this process`);
        return;
      }
      log.warn({ err: error, node: leases.nodeId }, "lease renewal failed: the event store is out of reach");
      if (!lost && Date.now() - lastHeld > leases.leaseMs) {
        lost = true;
        giveUp("this node lost its event store for longer than its lease");
      }
    } finally {
      renewing = false;
    }
  };
  const sweep = async (): Promise<void> => {
    if (lost) return;
    try {
      const taken = await engine.sweep();
      if (taken.length > 0) log.info({ sessions: taken }, "sessions taken over from nodes whose lease expired");
    } catch (error) {
      log.warn({ err: error }, "takeover sweep failed");
    }
  };
  const renewer = setInterval(() => void renew(), Math.max(50, leases.leaseMs / 3));
  const sweeper = setInterval(() => void sweep(), Math.max(100, leases.leaseMs / 2));
  renewer.unref();
  sweeper.unref();
  return {
    healthy: () => !lost,
    refusal: () =>
      displaced
        ? {
            code: "resource_exhausted" as const,
            message: `this process no longer holds node id ${leases.nodeId}: connect to another node`,
          }
        : null,
    stop() {
      clearInterval(renewer);
      clearInterval(sweeper);
    },
  };
};
