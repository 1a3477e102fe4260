import type { Subscription } from "rxjs";
import { streamOf } from "./log.ts";
import type { EventStore, RecordedEntry } from "./ports/index.ts";
import type { SessionHost } from "./session-host.ts";

/** The entries a takeover watch reads: another node's claim, and the resume that follows it there. */
const WATCHED_TYPES = ["SessionOwned", "AttachmentChanged"] as const;

/** What a session's sockets on the node that lost it are told, and when. */
export interface TakeoverWatchOptions {
  readonly store: EventStore;
  readonly host: SessionHost;
  /** This node's id (`SessionOwned.node` of its own claims). */
  readonly nodeId: string;
  /** The first revision the host did not read from the log (0 for a new session). */
  readonly from: number;
  /**
   * ms a host given up waits for the new owner's resume before its sockets get `runtime_append_failed` (a takeover
   * after this node's lease ran out has no resume behind it).
   */
  readonly resumeWaitMs: number;
  /** Called once when the watch ends (told its sockets, stopped, or the store's feed ended). */
  readonly onEnd?: () => void;
}

/**
 * A running watch: `stop` ends it (the session closed here, or the engine closes); `moved` is the host's
 * `onMovedAway` (its append was refused before the claim was read).
 */
export interface TakeoverWatch {
  /** The host's append was refused (another node fenced the stream or appended to it): it waits for the claim. */
  moved(): void;
  stop(): void;
}

const MOVED_MESSAGE = "the session moved to another node: resume it to reach that node";

/**
 * Follows a session's stream for another node's takeover (issue 33, part 2; BEHAVIOUR.md, "Moves lose nothing"),
 * so that the node that held it learns of it without waiting for its own next append. It reads the store's change
 * feed (`subscribe` from `from`, only `SessionOwned` and `AttachmentChanged`: on PostgreSQL the poll of the
 * subscribed streams every `poll_ms`, woken at once by the writer's NOTIFY; one query a tick for every stream
 * followed), and:
 * - at a `SessionOwned` of another node, gives the host up (`yieldTo`: no write, no runner, its sockets held);
 * - at the new owner's `AttachmentChanged{resumed}` after it, sends every socket here `session.replaced` (`replaced`)
 *   and ends;
 * - with no such resume within `resumeWaitMs` of the host giving up (a takeover by lease expiry, or a fence whose
 *   claim never came), lets the sockets go with `runtime_append_failed` (`letGo`), so their clients resume elsewhere.
 */
export const watchTakeover = (options: TakeoverWatchOptions): TakeoverWatch => {
  const { host, nodeId } = options;
  /** The node whose claim was read, once read. */
  let owner: string | null = null;
  let yielded = false;
  let done = false;
  let timer: NodeJS.Timeout | null = null;
  let subscription: Subscription | null = null;

  const stop = (): void => {
    if (!done) options.onEnd?.();
    done = true;
    if (timer !== null) clearTimeout(timer);
    timer = null;
    subscription?.unsubscribe();
  };

  /** The host is given up: its sockets wait for the new owner's resume, for at most `resumeWaitMs`. */
  const waitForResume = (): void => {
    if (done || timer !== null) return;
    timer = setTimeout(() => {
      if (done) return;
      stop();
      host.letGo(MOVED_MESSAGE);
    }, options.resumeWaitMs);
    timer.unref();
  };

  const seen = (entry: RecordedEntry): void => {
    if (done) return;
    if (entry.type === "SessionOwned") {
      const node = (entry.data as { node?: unknown }).node;
      if (typeof node !== "string" || node === nodeId) return;
      owner = node;
      if (!yielded) {
        // Given up already some other way (relinquished, closed): nothing of it is this watch's to tell.
        if (!host.yieldTo(MOVED_MESSAGE)) {
          stop();
          return;
        }
        yielded = true;
      }
      waitForResume();
      return;
    }
    if (owner === null || !yielded || entry.type !== "AttachmentChanged") return;
    if ((entry.data as { change?: unknown }).change !== "resumed") return;
    stop();
    host.replaced();
  };

  subscription = options.store
    .subscribe(streamOf(host.sessionId), options.from, { types: WATCHED_TYPES })
    .subscribe({ next: seen, error: stop, complete: stop });
  // A store that delivered everything at once may have ended the watch before `subscription` was set.
  if (done) subscription.unsubscribe();
  return {
    moved() {
      if (yielded) return;
      yielded = true;
      // A feed that ended (the store failed to read it) cannot tell of a resume: the sockets are let go of now.
      if (done) host.letGo(MOVED_MESSAGE);
      else waitForResume();
    },
    stop,
  };
};
