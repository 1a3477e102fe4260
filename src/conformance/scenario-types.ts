/**
 * What a validated conformance scenario is (conformance/README.md): its steps, each on a connection, the audio a
 * `stream_audio` step sends, and the patterns `expect` steps match. The schema (scenario-schema.ts) builds these from
 * a file; the loader (scenario.ts) re-exports them.
 */

/** A partial JSON pattern (see pattern.ts). */
export type Pattern = unknown;

/** Audio streamed by `stream_audio`: a WAV of the audio folder, cut in `chunkMs` appends. Times in ms, rate in Hz. */
export interface AudioStream {
  readonly file: string;
  readonly chunkMs: number;
  /** `realtime`: one chunk every `chunkMs`; `fast`: as fast as the socket takes them. */
  readonly pace: "realtime" | "fast";
  /** Sample rate to send at (the file is resampled); absent: the file's own rate (8000 for G.711). */
  readonly rate: number | null;
  readonly format: "pcm16" | "g711_ulaw" | "g711_alaw" | "pcm_f32le";
  readonly silenceBeforeMs: number;
  readonly silenceAfterMs: number;
  /** Only the first `maxMs` of the file. */
  readonly maxMs: number | null;
  /** Extra fields of every append (templated); `type` replaces the event type (an alias such as `push_chunk`). */
  readonly fields: Readonly<Record<string, unknown>>;
}

/** One step of a scenario, on connection `conn` (default `main`). */
export type Step = { readonly conn: string; readonly line: string } & StepAction;

/** What a step does (conformance/README.md, "Steps"). Times in ms. */
export type StepAction =
  | { readonly kind: "connect"; readonly query: string | null }
  | { readonly kind: "send"; readonly event: Readonly<Record<string, unknown>> }
  | { readonly kind: "send_raw"; readonly text: string }
  | {
      readonly kind: "send_raw_generated";
      readonly prefix: string;
      readonly repeat: string;
      readonly bytes: number;
      readonly suffix: string;
    }
  | { readonly kind: "stream_audio"; readonly audio: AudioStream }
  | {
      readonly kind: "expect";
      readonly events: readonly Pattern[];
      readonly withinMs: number;
      /** The expected events are exactly the next events, in order. */
      readonly strict: boolean;
      /** The expected events may come in any order. */
      readonly anyOrder: boolean;
      /** None of these may come between the cursor and the last expected event. */
      readonly absent: readonly Pattern[];
    }
  | {
      readonly kind: "expect_absent";
      readonly events: readonly Pattern[];
      readonly forMs: number | null;
      readonly until: Pattern | null;
      readonly withinMs: number;
    }
  | {
      readonly kind: "expect_seq";
      readonly after: unknown;
      readonly until: Pattern;
      readonly withinMs: number;
      readonly unordered: readonly Pattern[];
    }
  | {
      readonly kind: "expect_cycle";
      readonly events: readonly Pattern[];
      readonly until: Pattern | null;
      readonly withinMs: number;
      readonly minCycles: number;
    }
  | { readonly kind: "capture"; readonly from: Pattern; readonly vars: Readonly<Record<string, string>> }
  | { readonly kind: "set"; readonly vars: Readonly<Record<string, unknown>> }
  | { readonly kind: "wait"; readonly ms: number }
  | { readonly kind: "drop_socket" }
  | { readonly kind: "reconnect"; readonly query: string | null }
  | { readonly kind: "repeat"; readonly times: unknown; readonly as: string; readonly steps: readonly Step[] };

/** A validated scenario. */
export interface Scenario {
  readonly name: string;
  readonly description: string;
  /** Where the behaviour is specified, e.g. "BEHAVIOUR.md scenario 7". */
  readonly behaviour: string | null;
  /** What the server must offer, else the scenario is skipped: patterns of session.created's session. */
  readonly requires: { readonly capabilities: Pattern | null; readonly session: Pattern | null };
  /** Variables and their defaults (overridable by the caller, e.g. `--var max_sessions=2`). */
  readonly vars: Readonly<Record<string, unknown>>;
  /** Known deviation of our server: the scenario is expected to fail, and the report says so. */
  readonly knownFailure: string | null;
  readonly timeoutMs: number;
  readonly steps: readonly Step[];
  /** The file it came from. */
  readonly file: string;
}
