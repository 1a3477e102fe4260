import type { Command } from "../../domain/index.ts";
import { type RecordedEntry, stepsOf } from "../../engine/index.ts";

/**
 * What a client grader reads and what it answers (issue 23): the session's log read as steps (each input with the
 * decisions it led to, by log revision), what the peer did to the connection, and the grade (a verdict, why, and the
 * log revisions that decided it). The graders themselves sit one file per rule they judge (graders.ts lists them).
 */
export type Verdict = "pass" | "non-strict" | "informational" | "unsupported" | "fail" | "harness-broken";

export interface Evidence {
  /** The log revision of the entry, or null for something the peer did. */
  readonly revision: number | null;
  /** ms since the session's first entry. */
  readonly at_ms: number;
  readonly what: string;
}

export interface Grade {
  readonly verdict: Verdict;
  /** Why, with this session's figures and ids. */
  readonly message: string;
  /** Why, in words that do not change from run to run (for tables that compare clients). */
  readonly reason: string;
  readonly evidence: readonly Evidence[];
  /** Rules of the case the client's session exercised (e.g. `truncate`, `playback.ack`, `resume`). */
  readonly exercised: readonly string[];
}

/** What the peer did on the case's connection: the action, the server event that triggered it, when (ms epoch). */
export interface PeerAction {
  readonly do: string;
  readonly on: string;
  readonly at: number;
}

export interface GradeInput {
  readonly entries: readonly RecordedEntry[];
  readonly actions: readonly PeerAction[];
  /** Profiles the client declared it does not do (`--unsupported resume,playback`). */
  readonly unsupported: readonly string[];
}

/** One step of the log as the graders read it: its input (a client command or not) and its decisions. */
export interface Step {
  /** The log revision of the step's input. */
  readonly revision: number;
  /** ms epoch, the log's clock. */
  readonly at: number;
  /** The client command the input carried (`CommandReceived`), else null. */
  readonly command: Command | null;
  /** The code of the step's `RequestRejected`, or null when nothing was refused. */
  readonly rejected: string | null;
  /** The decisions, each at its own revision (counting on from the input's). */
  readonly events: readonly {
    readonly revision: number;
    readonly type: string;
    readonly data: Record<string, unknown>;
  }[];
  /** The input entry's type (`CommandReceived`, `AttachmentChanged`, ...). */
  readonly input: string;
}

/** The steps of a session's log (engine `stepsOf`), each with its command, its refusal code and its decisions. */
export const stepsFor = (entries: readonly RecordedEntry[]): Step[] =>
  stepsOf(entries).map((s) => {
    const command = s.input.type === "CommandReceived" ? s.input.data.command : null;
    // A step's decisions follow its input in the log: their revisions count on from it.
    const events = s.decisions.map((d, i) => ({
      revision: s.revision + 1 + i,
      type: d.envelope.event.type,
      data: d.envelope.event.data as unknown as Record<string, unknown>,
    }));
    const rejection = events.find((e) => e.type === "RequestRejected");
    return {
      revision: s.revision,
      at: s.input.at,
      command,
      rejected: rejection === undefined ? null : String(rejection.data.code),
      events,
      input: s.input.type,
    };
  });

/** A grade; `reason` defaults to `message`, `exercised` to none. */
export const grade = (
  verdict: Verdict,
  message: string,
  evidence: Evidence[],
  exercised: string[] = [],
  reason: string = message,
): Grade => ({
  verdict,
  message,
  reason,
  evidence,
  exercised,
});

/** A grader: the case's input, the log's steps, and the ms epoch of the session's first entry, to a grade. */
export type Grader = (input: GradeInput, steps: Step[], t0: number) => Grade;

/** The peer's action of `kind`, or a harness-broken grade when it never happened (the trigger never came). */
export const actionOf = (input: GradeInput, kinds: readonly string[]): PeerAction | null =>
  input.actions.find((a) => kinds.includes(a.do)) ?? null;

export const broken = (message: string): Grade => grade("harness-broken", message, []);
