import pg from "pg";
import type { ExpectedRevision } from "../../engine/ports/event-store.ts";
import type { EncodedEntry } from "./codec.ts";
import { commitGroupOn, type Outcome, type Pending } from "./postgres-appends.ts";
import { APPEND_LOCK, SCHEMA } from "./postgres-schema.ts";

/** What the PostgreSQL store's appends need (postgres.ts `PostgresEventStoreOptions`). */
export interface AppenderOptions {
  readonly url: string;
  /** `idle_in_transaction_session_timeout` of the appends' connection, ms (default 2000). */
  readonly transactionTimeoutMs?: number;
  /** Observes each group commit: appends, entries, and how long its transaction took (ms). */
  readonly onGroupCommit?: (appends: number, entries: number, ms: number) => void;
}

/** Takes the appends' advisory lock inside `client`'s transaction (every writer of the database takes it). */
export const lockAppends = async (client: pg.ClientBase): Promise<void> => {
  await client.query("SELECT pg_advisory_xact_lock($1)", [APPEND_LOCK.toString()]);
};

/**
 * The PostgreSQL store's appends (postgres.ts): one connection of their own, opened again after one failed (a cut
 * network, a transaction PostgreSQL ended); the appends that arrive while a group commits wait and form the next
 * group, committed in one transaction (postgres-appends.ts); a group whose transaction fails is committed again one
 * append at a time, so each outcome names its own cause.
 */
export class PostgresAppender {
  private writer: pg.Client | null = null;
  private queue: Pending[] = [];
  private flushing: Promise<void> | null = null;

  /** `instance`: this store in `duplex_fences.holder`. */
  constructor(
    private readonly options: AppenderOptions,
    readonly instance: string,
  ) {}

  /** Creates the schema (under the appends' lock, so two nodes starting at once do not race). */
  async createSchema(): Promise<void> {
    const setup = await this.connect();
    await setup.query("BEGIN");
    await lockAppends(setup);
    await setup.query(SCHEMA);
    await setup.query("COMMIT");
  }

  /** Queues one append for the next group; resolves with its outcome. @throws the driver's error for it. */
  append(stream: string, expected: ExpectedRevision, entries: readonly EncodedEntry[]): Promise<Outcome> {
    return new Promise<Outcome>((resolve, reject) => {
      this.queue.push({ stream, expected, entries, resolve, reject });
      this.flushing ??= new Promise<void>((go) => setImmediate(go)).then(() => this.flush());
    });
  }

  /** Resolves once every append queued so far is committed (or failed). */
  async idle(): Promise<void> {
    await this.flushing;
  }

  /** Ends the appends' connection. */
  async end(): Promise<void> {
    await this.writer?.end();
  }

  private async connect(): Promise<pg.Client> {
    const client = new pg.Client({
      connectionString: this.options.url,
      idle_in_transaction_session_timeout: this.options.transactionTimeoutMs ?? 2000,
    });
    client.on("error", () => {
      if (this.writer === client) this.writer = null;
    });
    await client.connect();
    this.writer = client;
    return client;
  }

  /** One group in one transaction; the outcomes in the order of `group`. @throws the driver's error. */
  private async commitGroup(group: readonly Pending[]): Promise<Outcome[]> {
    const db = this.writer ?? (await this.connect());
    try {
      return await commitGroupOn(db, group, this.instance);
    } catch (error) {
      // The connection may be broken: the next group opens another.
      if (this.writer === db) this.writer = null;
      void db.end().catch(() => undefined);
      throw error;
    }
  }

  private async flush(): Promise<void> {
    while (this.queue.length > 0) {
      const group = this.queue;
      this.queue = [];
      try {
        const started = performance.now();
        const outcomes = await this.commitGroup(group);
        this.options.onGroupCommit?.(
          group.length,
          group.reduce((n, p) => n + p.entries.length, 0),
          performance.now() - started,
        );
        for (const [i, p] of group.entries()) p.resolve(outcomes[i] as Outcome);
      } catch (error) {
        if (group.length === 1) {
          group[0]?.reject(error as Error);
          continue;
        }
        // Each on its own, so each outcome names its own cause.
        for (const p of group) {
          try {
            const [outcome] = await this.commitGroup([p]);
            p.resolve(outcome as Outcome);
          } catch (one) {
            p.reject(one as Error);
          }
        }
      }
    }
    this.flushing = null;
  }
}
