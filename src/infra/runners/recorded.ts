/**
 * The `recorded` runner (DESIGN.md, "Ports": ModelRunner): a recorded session's model, played back. It serves the
 * stage outputs of a session's log (of any runner, the upstream one above all: a GPU model's answers, recorded once)
 * to a live session whose input matches the recording, and says exactly where a new input diverges.
 *
 * The recording is read as the runner saw it: every call the engine made of its runner (`submit` of a unit, `abort`
 * of an epoch), derived from the log as the engine derives them (src/engine/effects.ts), and every stage output, in
 * the order they happened. Live, each call must be the recording's next one; the outputs that followed it in the
 * recording are then emitted, in order, up to the next call. Units are compared whole (audio by its bytes); the
 * derived ids of the recorded session, in its calls and outputs, are read as the live session's. The first call that is not the
 * recording's (or one after the recording ended) is a divergence: the runner emits `stage_lost` with
 * `recording_diverged`, naming the call's position, the recorded revision it matches, and both calls, and serves
 * nothing more. Outputs recorded before the first call (an upstream session's) are emitted as the session opens.
 *
 * Not played back: a runner reopened within the recording (a restart or a move, whose `resubmit` the engine derives
 * from the log's unanswered audio): a live session that moves opens the runner again, and the recording is served
 * from its start to each runner session.
 */
import { createHash } from "node:crypto";
import { type Capabilities, retagged, type StageOutput } from "../../domain/index.ts";
import { type Effect, effectsOf } from "../../engine/effects.ts";
import { type RecordedEntry, stepsOf } from "../../engine/index.ts";
import type { ModelRunner, RunnerSession } from "../../engine/ports/index.ts";
import { foldRecorded, INITIAL_SNAPSHOT } from "../../engine/step.ts";

/** One call of the runner or one output, as the recording has them. */
type Beat =
  | { readonly kind: "call"; readonly call: RunnerCall; readonly revision: number; readonly clientInput: number }
  | { readonly kind: "output"; readonly output: StageOutput }
  /** Where the recording took its client input `n` (1-based): a paced playback holds the outputs after it. */
  | { readonly kind: "client"; readonly n: number };

/** A call the engine makes of its runner that the recording is matched on. */
type RunnerCall = Extract<Effect, { kind: "submit" }> | Extract<Effect, { kind: "abort" }>;

/** A call as text for comparison: JSON with every byte array as its length and SHA-256. */
const callKey = (call: RunnerCall): string =>
  JSON.stringify(call, (_key, value: unknown) =>
    value instanceof Uint8Array
      ? `bytes:${value.byteLength}:${createHash("sha256").update(value).digest("hex").slice(0, 16)}`
      : value,
  );

/** A call in words, for a divergence's message: its kind, epoch and what tells it apart. */
const describeCall = (call: RunnerCall): string => {
  if (call.kind === "abort") return `abort of the epochs before ${call.epoch}`;
  const u = call.unit;
  const detail =
    u.kind === "append"
      ? `${u.audio.byteLength} bytes from ${Math.round(u.startMs)} ms`
      : u.kind === "respond"
        ? u.responseId
        : u.kind === "text"
          ? JSON.stringify(u.text.slice(0, 40))
          : u.kind === "function_call_output"
            ? `call ${u.callId.slice(0, 64)}`
            : u.kind === "playback"
              ? `${u.responseId} played ${Math.round(u.playedMs)} ms`
              : u.kind === "item"
                ? u.item.id
                : u.kind === "commit"
                  ? (u.itemId ?? "")
                  : "";
  return `${u.kind} unit (epoch ${u.epoch}${detail === "" ? "" : `, ${detail}`})`;
};

/** The recording as beats, with the session id and capabilities it was recorded with. */
const beatsOf = (entries: readonly RecordedEntry[]) => {
  const beats: Beat[] = [];
  let snapshot = INITIAL_SNAPSHOT;
  let sessionId: string | null = null;
  let capabilities: Capabilities | null = null;
  let clientInput = 0;
  for (const step of stepsOf(entries)) {
    const { input } = step;
    if (input.type === "SessionOpened") {
      sessionId = input.data.sessionId;
      capabilities = input.data.capabilities;
    }
    if (input.type === "CommandReceived") {
      clientInput += 1;
      beats.push({ kind: "client", n: clientInput });
    }
    if (input.type === "StageOutputReceived") beats.push({ kind: "output", output: input.data.output });
    const before = snapshot.state;
    snapshot = foldRecorded(snapshot, step, false).snapshot;
    const events = step.decisions.map((d) => d.envelope.event);
    for (const effect of effectsOf(input, events, before, snapshot.state)) {
      if (effect.kind === "submit" || effect.kind === "abort") {
        beats.push({ kind: "call", call: effect, revision: step.revision, clientInput });
      }
    }
  }
  if (sessionId === null || capabilities === null) throw new Error("the recording has no SessionOpened");
  return { beats, sessionId, capabilities };
};

/** The recorded runner: a model runner, and how a re-drive of the recording paces it (`paced`). */
export interface RecordedRunner extends ModelRunner {
  /**
   * The live session has taken its client input `n` (1-based): a paced playback emits the outputs the recording had
   * after its input `n`, up to its next call or client input.
   */
  follow(n: number): void;
}

/**
 * A runner that plays back the session recorded in `entries` (a session stream, as `duplex export` writes it).
 * `paced`: the outputs the recording had after one of its client inputs wait for `follow` of that input, so that a
 * re-drive of the recording (src/replay/redrive.ts) takes them among its inputs where the recording took them;
 * unpaced (a live client), each output comes as soon as the call before it.
 * @throws Error when the entries are not a session stream.
 */
export const createRecordedRunner = (
  entries: readonly RecordedEntry[],
  options: { readonly name?: string; readonly paced?: boolean } = {},
): RecordedRunner => {
  const recording = beatsOf(entries);
  let followed = options.paced === true ? 0 : Number.POSITIVE_INFINITY;
  const players = new Set<() => void>();
  return {
    name: options.name ?? "recorded",
    follow(n) {
      followed = Math.max(followed, n);
      for (const play of players) play();
    },
    capabilities: recording.capabilities,
    open(session, emit): RunnerSession {
      // What the recording names by its session's derived ids is named by the live session's.
      const live = <T>(value: T): T => retagged(value, recording.sessionId, session.sessionId);
      let next = 0;
      let calls = 0;
      let diverged = false;
      let closed = false;
      /** Emits the outputs from `next` up to the recording's next call, or its next client input not followed yet. */
      const play = (): void => {
        for (
          let beat = recording.beats[next];
          !closed && !diverged && beat !== undefined;
          beat = recording.beats[next]
        ) {
          if (beat.kind === "call" || (beat.kind === "client" && beat.n > followed)) return;
          next += 1;
          if (beat.kind === "output") emit(live(beat.output));
        }
      };
      players.add(play);
      const called = (call: RunnerCall): void => {
        if (closed || diverged) return;
        calls += 1;
        // A call made on a client input shows the input was taken: the client marks up to the call are passed.
        while (recording.beats[next]?.kind === "client") next += 1;
        const expected = recording.beats[next];
        if (expected?.kind === "call" && callKey(live(expected.call)) === callKey(call)) {
          next += 1;
          play();
          return;
        }
        diverged = true;
        const recorded =
          expected?.kind === "call"
            ? `the recording's is ${describeCall(live(expected.call))}, at revision ${expected.revision} after its client input #${expected.clientInput}`
            : `the recording ended after ${calls - 1} calls`;
        emit({
          kind: "stage_lost",
          epoch: call.kind === "abort" ? call.epoch : call.unit.epoch,
          code: "recording_diverged",
          message: `this session diverges from the recording at its runner call ${calls}: it is ${describeCall(call)}; ${recorded}`,
        });
      };
      // The outputs recorded before the first call (an upstream session's handshake) come as the session opens.
      queueMicrotask(play);
      return {
        submit: (unit) => called({ kind: "submit", unit }),
        abort: (epoch) => called({ kind: "abort", epoch }),
        configure: () => undefined,
        close: async () => {
          closed = true;
          players.delete(play);
        },
      };
    },
    close: async () => undefined,
  };
};
