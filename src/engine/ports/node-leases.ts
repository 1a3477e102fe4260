/**
 * The NodeLeases port (issue 22, part 4): the nodes that share one event store, each alive while its lease holds.
 * Leases run on the store's clock (the database's `now()`), never a node's, so a node that was paused or whose clock
 * drifted cannot think itself alive past its lease. A store of one node (sqlite) needs none.
 */
export interface NodeLeases {
  /** This node's id, as it appears in `SessionOpened.node` and `SessionOwned.node`. */
  readonly nodeId: string;
  /** How long a lease lasts once renewed, ms. */
  readonly leaseMs: number;
  /**
   * Renews this node's lease to `leaseMs` from now (the store's clock). Returns whether it was still held: false
   * when it had expired, so that other nodes may have taken this node's sessions over.
   * @throws NodeIdInUseError when another process holds this node id's lease now (this one's ran out and a process
   *   started with the same id took it): this process may serve nothing as that node again; the store's error when
   *   it cannot be reached.
   */
  renew(): Promise<boolean>;
  /**
   * Takes this node's lease as a node starts. A lease of this node id held by another process is waited out once
   * (a node restarted after a crash: at most `leaseMs`); one that process renews meanwhile is alive.
   * @throws NodeIdInUseError when another live process holds this node id; the store's error when it cannot be
   *   reached.
   */
  claim(): Promise<void>;
  /**
   * Whether `node`'s lease holds now (the store's clock); a node that never had one does not hold one.
   * @throws the store's error when it cannot be reached.
   */
  holds(node: string): Promise<boolean>;
  /** Gives the lease up (a clean shutdown: the node's sessions may be taken over at once). */
  release(): Promise<void>;
}

/**
 * Thrown by `NodeLeases.claim` when another live process renews the lease of this node id (two processes started
 * with one `node.id`, or a node restarted while its old process still runs). `code` is `"node_id_in_use"`.
 */
export class NodeIdInUseError extends Error {
  readonly code = "node_id_in_use";
  constructor(readonly nodeId: string) {
    super(
      `node id ${nodeId} is in use: another process holds its lease and renews it; give this process another node id (--node-id or node.id), or stop the other one`,
    );
    this.name = "NodeIdInUseError";
  }
}
