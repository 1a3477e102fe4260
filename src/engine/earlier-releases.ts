import { createHash } from "node:crypto";
import {
  type DomainEvent,
  type EarlierRules,
  emptyLedger,
  evolve,
  INPUT_TYPES,
  initialState,
  laneOf,
  type SessionState,
} from "../domain/index.ts";
import { type EarlierWireRules, initialWireState, reduceWire } from "../projections/index.ts";
import type { RecordedEntry } from "./ports/index.ts";

/**
 * Logs of earlier releases (issue 33, part 1; docs/log-format.md, "Logs of earlier releases"). Every log written
 * before the schema had a version claims schema 1, yet the releases that wrote them differ: fields were added to
 * the entries, decision rules changed, and the server rendered other bytes for the same decisions. Each such change
 * is one {@link EarlierChange}, named by its commit, in the order they were made. A log predates a change when it
 * shows it (a field the change added is absent, a decision only the old rule makes, the recorded digest of its
 * `session.created`); since history is a line, a log that predates one change predates every later one. Reading
 * such a log applies each change it predates, oldest first:
 *
 * - `upcast` fills what the change added with the value that release used, in the place today's decider puts it
 *   (key order is part of the bytes a replay compares), and names the old decision rules in
 *   `SessionOpened.rules` and `SessionCreated.rules` (`EarlierRules`): the session keeps them, in a replay and
 *   after an upgrade alike, as it keeps the configuration it was created with;
 * - `wire` turns a server event as rendered today into the bytes that release sent, and `wireRules` numbers the
 *   events as it did, so that the recorded SHA-256 of each server event still compares equal. Only entries written
 *   without a hash chain get them (`metadata.renderedBefore`): the entries a chain-era server appended to an old
 *   session after an upgrade carry a digest, and were rendered as today.
 *
 * Nothing is written back; every function here is pure.
 */

type Json = Record<string, unknown>;

/** One change between releases that an old log may predate. */
export interface EarlierChange {
  /** The commit that made the change, as `git log --format=%h` names it. */
  readonly commit: string;
  /** What changed, in a line. */
  readonly summary: string;
  /** Whether the log was written before the change: true or false when it shows it, null when it cannot tell. */
  readonly before: (entries: readonly RecordedEntry[]) => boolean | null;
  /** The entries of a log written before the change in today's shape (fills only what is absent). */
  readonly upcast?: (entries: readonly RecordedEntry[]) => RecordedEntry[];
  /** A server event (parsed JSON) as rendered today, as the release before the change rendered it. */
  readonly wire?: (event: Json) => Json;
  /** How the release before the change numbered server events. */
  readonly wireRules?: EarlierWireRules;
  /**
   * The log schema in force when the change was made (absent: 1). A change made after the hash chain came in (2) may
   * be predated by logs of that schema too, and is looked for in them as well (see `upcastEarlierReleases`).
   */
  readonly sinceSchema?: number;
  /**
   * What of the release before the change a replay does not reproduce (it would need that release's decider code):
   * said with a divergence of such a log, so that it reads as what it is.
   */
  readonly unreproduced?: string;
}

/** The metadata key, on upcast entries only, naming the changes (commits) whose wire the entry was rendered before. */
export const RENDERED_BEFORE = "renderedBefore";

const isInput = (type: string): boolean => (INPUT_TYPES as readonly string[]).includes(type);

const withData = (entry: RecordedEntry, data: unknown): RecordedEntry => ({ ...entry, data });

/** `o` with `key: value` right after `after` (at the end when `after` is absent); `o` itself when `key` is there. */
const insertAfter = (o: Json, after: string, key: string, value: unknown): Json => {
  if (key in o) return o;
  if (!(after in o)) return { ...o, [key]: value };
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) {
    out[k] = v;
    if (k === after) out[key] = value;
  }
  return out;
};

/** `o` without the key at `path` (the objects along it copied, key order kept); `o` itself when it is absent. */
const withoutKey = (o: Json, path: readonly string[]): Json => {
  const [head, ...rest] = path;
  if (head === undefined || !(head in o)) return o;
  if (rest.length === 0) {
    const { [head]: _dropped, ...kept } = o;
    return kept;
  }
  const inner = o[head];
  if (inner === null || typeof inner !== "object" || Array.isArray(inner)) return o;
  const changed = withoutKey(inner as Json, rest);
  return changed === inner ? o : { ...o, [head]: changed };
};

const withoutKeys =
  (...paths: readonly (readonly string[])[]) =>
  (event: Json): Json =>
    paths.reduce(withoutKey, event);

const first = (entries: readonly RecordedEntry[], type: string): Json | undefined =>
  entries.find((e) => e.type === type)?.data as Json | undefined;

/** Whether the first entry of `type` lacks `key` (null: there is none). */
const firstLacks = (entries: readonly RecordedEntry[], type: string, key: string): boolean | null => {
  const data = first(entries, type);
  return data === undefined ? null : !(key in data);
};

const configOf = (entries: readonly RecordedEntry[]): Json | undefined =>
  (first(entries, "SessionCreated") as { config?: Json } | undefined)?.config;

const configLacks = (key: string) => (entries: readonly RecordedEntry[]) => {
  const config = configOf(entries);
  return config === undefined ? null : !(key in config);
};

/** The first verdict that is not null, in order. */
const either = (...verdicts: readonly (() => boolean | null)[]): boolean | null => {
  for (const verdict of verdicts) {
    const v = verdict();
    if (v !== null) return v;
  }
  return null;
};

/** `rule` set in the session's `SessionOpened.rules` and `SessionCreated.rules`. */
const withRule =
  (rule: keyof EarlierRules) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => {
      if (e.type !== "SessionOpened" && e.type !== "SessionCreated") return e;
      const data = e.data as Json & { rules?: Json };
      return withData(e, { ...data, rules: { ...data.rules, [rule]: true } });
    });

/**
 * The configuration of `SessionCreated` and `SessionConfigured` with `fields` where absent: after `after` (in
 * order), or at the end.
 */
const fillConfig =
  (fields: Json, after?: string) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => {
      if (e.type !== "SessionCreated" && e.type !== "SessionConfigured") return e;
      const data = e.data as Json & { config: Json };
      let config = data.config;
      let at = after;
      for (const [key, value] of Object.entries(fields)) {
        if (at === undefined) config = key in config ? config : { ...config, [key]: value };
        else {
          config = insertAfter(config, at, key, value);
          at = key;
        }
      }
      return config === data.config ? e : withData(e, { ...data, config });
    });

/** Each entry of `type` passed through `change` (`data` in, data out). */
const mapData =
  (type: string, change: (data: Json) => Json) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    entries.map((e) => (e.type === type ? withData(e, change(e.data as Json)) : e));

const pipe =
  (...steps: readonly ((entries: readonly RecordedEntry[]) => RecordedEntry[])[]) =>
  (entries: readonly RecordedEntry[]): RecordedEntry[] =>
    steps.reduce<RecordedEntry[]>((out, step) => step(out), [...entries]);

/** `ResponseEnded` with `key` taken from the `ResponseStarted` of the same response (`pick` of its data). */
const fromResponseStart = (key: string, after: string | null, pick: (started: Json | undefined) => unknown) => {
  return (entries: readonly RecordedEntry[]): RecordedEntry[] => {
    const started = new Map<unknown, Json>();
    return entries.map((e) => {
      const data = e.data as Json;
      if (e.type === "ResponseStarted") started.set(data.responseId, data);
      if (e.type !== "ResponseEnded" || key in data) return e;
      const value = pick(started.get(data.responseId));
      return withData(e, after === null ? { ...data, [key]: value } : insertAfter(data, after, key, value));
    });
  };
};

/**
 * Folds the recorded decisions and calls `visit` with each input and its decisions, and the state before them;
 * returns the first verdict `visit` gives that is not null.
 */
const foldSteps = (
  entries: readonly RecordedEntry[],
  visit: (input: RecordedEntry, decisions: readonly RecordedEntry[], before: SessionState) => boolean | null,
): boolean | null => {
  let state = initialState;
  let i = 0;
  while (i < entries.length) {
    const input = entries[i] as RecordedEntry;
    let j = i + 1;
    while (j < entries.length && !isInput((entries[j] as RecordedEntry).type)) j += 1;
    const decisions = entries.slice(i + 1, j);
    const verdict = isInput(input.type) ? visit(input, decisions, state) : null;
    if (verdict !== null) return verdict;
    for (const d of decisions) state = evolve(state, { type: d.type, data: d.data } as DomainEvent);
    i = j;
  }
  return null;
};

const commandOf = (input: RecordedEntry | undefined): string | undefined =>
  input?.type === "CommandReceived" ? (input.data as { command?: { type?: string } }).command?.type : undefined;

/**
 * Whether the log's `session.created` was sent by a release before `commit`: its recorded SHA-256 against today's
 * rendering of the recorded `SessionCreated` turned into the bytes of the releases before (`commit` and the changes
 * after it) and after it (only those after it). For a change of the wire alone, which no field of the log shows.
 */
const sentBefore =
  (commit: string) =>
  (entries: readonly RecordedEntry[]): boolean | null => {
    const created = entries.find((e) => e.type === "SessionCreated");
    const recorded = (created?.metadata.wire as { sha256?: string }[] | undefined)?.[0]?.sha256;
    if (created === undefined || recorded === undefined) return null;
    const json = reduceWire(initialWireState, {
      event: { type: "SessionCreated", data: created.data } as DomainEvent,
      metadata: { at: created.metadata.at, epoch: created.metadata.epoch, turnId: created.metadata.turnId },
    }).emitted[0]?.json;
    if (json === undefined) return null;
    const at = EARLIER_CHANGES.findIndex((c) => c.commit === commit);
    const commits = EARLIER_CHANGES.slice(at).map((c) => c.commit);
    const sha = (of: readonly string[]) => createHash("sha256").update(earlierWireJson(json, of)).digest("hex");
    if (sha(commits) === recorded) return true;
    if (sha(commits.slice(1)) === recorded) return false;
    return null;
  };

/**
 * Whether speech was in progress (`speechInProgress` of domain/input-flow.ts) in the state the entries before `end`
 * fold to, read back from the last decisions that set it instead of folding them all (domain/evolve.ts): the
 * endpointer is in the phase the last `AudioBuffered` recorded unless an `InputCleared`, or an `InputCommitted` that
 * reset it, came after; the speech started at the last `SpeechStarted` unless a `SpeechStopped` came after it. Costs
 * the entries back to the last append, not the whole log. test/engine/earlier-detection.test.ts holds it equal to the
 * fold at every entry of the recorded logs.
 */
export const speechInProgressBefore = (entries: readonly RecordedEntry[], end: number): boolean => {
  let speaking: boolean | null = null;
  let started: boolean | null = null;
  for (let i = end - 1; i >= 0 && (speaking === null || started === null); i -= 1) {
    const e = entries[i] as RecordedEntry;
    if (speaking === null) {
      if (e.type === "AudioBuffered")
        speaking = (e.data as { endpointer?: { phase?: string } }).endpointer?.phase === "speech";
      else if (e.type === "InputCleared" || (e.type === "InputCommitted" && (e.data as Json).resetEndpointer === true))
        speaking = false;
      if (speaking === false) return false;
    }
    if (started === null) {
      if (e.type === "SpeechStarted") started = true;
      else if (e.type === "SpeechStopped") started = false;
      if (started === false) return false;
    }
  }
  return speaking === true && started === true;
};

/**
 * The changes, oldest first. Each says what a log written before it lacks and what fills it; docs/log-format.md,
 * "Logs of earlier releases", lists the same.
 */
export const EARLIER_CHANGES: readonly EarlierChange[] = [
  {
    commit: "42f53f0",
    summary:
      "the event catalogue: overlap decisions; responses name their modalities, instructions, text and tool calls; commits their text; history items their type",
    before: (entries) =>
      either(
        () => firstLacks(entries, "ResponseStarted", "modalities"),
        () => firstLacks(entries, "InputCommitted", "text"),
      ),
    upcast: pipe(
      withRule("noOverlapDecisions"),
      mapData("ResponseStarted", (d) =>
        "modalities" in d ? d : { ...d, modalities: ["audio", "text"], instructions: null },
      ),
      mapData("ResponseEnded", (d) => ("functionCalls" in d ? d : { ...d, text: null, functionCalls: [] })),
      mapData("InputCommitted", (d) => ("text" in d ? d : { ...d, resetEndpointer: true, text: "" })),
      mapData("HistoryCommitted", (d) => {
        const item = d.item as Json;
        if ("type" in item) return d;
        const { id, ...rest } = item;
        return { ...d, item: { id, type: "message", audio: true, ...rest } };
      }),
    ),
    unreproduced:
      "that release's server VAD (a barge-in at the first speech_started over a response, a commit of everything buffered when speech stopped) and its settling of cancelled items under estimated playback",
  },
  {
    // Resume came in a release of its own, before 83a7701's (a log of it lacks all that 83a7701 added).
    commit: "ea7ac2c",
    summary: "resume and restart: a dropped socket detaches the session (SessionDetached), a resume re-attaches it",
    before: (entries) => {
      for (let i = 0; i < entries.length; i += 1) {
        const e = entries[i] as RecordedEntry;
        if (e.type === "SessionClosed") return null;
        if (e.type !== "AttachmentChanged") continue;
        const next = entries[i + 1];
        // An attachment of an open session decides something today (SessionDetached, SessionResumed, SessionClosed).
        return next === undefined ? null : isInput(next.type);
      }
      return null;
    },
    upcast: withRule("attachmentsDecideNothing"),
  },
  {
    commit: "83a7701",
    summary:
      "held-back speech_started (SpeechStarted/SpeechStopped.announced), a 24 kHz default input rate, resume and restart (attachments decide), ResponseEnded.previousItemId",
    before: (entries) =>
      either(
        () => firstLacks(entries, "SpeechStarted", "announced"),
        () => firstLacks(entries, "ResponseEnded", "previousItemId"),
        () => {
          const runner = (first(entries, "SessionOpened") as { capabilities?: { inputSampleRateHz?: number } })
            ?.capabilities?.inputSampleRateHz;
          const rate = (configOf(entries) as { inputAudio?: { rate?: number } } | undefined)?.inputAudio?.rate;
          if (runner === undefined || rate === undefined || runner === 24000) return null;
          return rate === runner ? true : rate === 24000 ? false : null;
        },
      ),
    upcast: pipe(
      withRule("speechNeverHeldBack"),
      withRule("inputRateOfRunner"),
      mapData("SpeechStarted", (d) => ("announced" in d ? d : { ...d, announced: true })),
      mapData("SpeechStopped", (d) => ("announced" in d ? d : { ...d, announced: true })),
      fromResponseStart("previousItemId", "itemId", (s) => s?.previousItemId ?? null),
    ),
    unreproduced:
      "an utterance after a stop that was not committed kept the item id of the one before (since: a new item)",
  },
  {
    commit: "9f798cd",
    summary: "the session object echoes input_audio_noise_reduction",
    before: (entries) => sentBefore("9f798cd")(entries),
    wire: withoutKeys(["session", "input_audio_noise_reduction"]),
  },
  {
    commit: "3c56b6d",
    summary:
      "the session object shows the session's state (SessionConfigured.view); response.created names the response's modalities; conversation.item.truncated carries its event",
    before: (entries) =>
      either(
        () => firstLacks(entries, "SessionConfigured", "view"),
        () => sentBefore("3c56b6d")(entries),
      ),
    upcast: (entries) => {
      let state = initialState;
      return entries.map((e) => {
        if (isInput(e.type)) return e;
        let out = e;
        if (e.type === "SessionConfigured" && !("view" in (e.data as Json))) {
          const last = Object.values(state.audio).at(-1);
          const view = {
            turnState: state.turnState,
            activeResponseId: state.response?.id ?? null,
            activeResponseTurnId: state.response?.turnId ?? null,
            playback: (state.response === null ? last : state.audio[state.response.itemId])?.ledger ?? emptyLedger,
          };
          out = withData(e, { ...(e.data as Json), view });
        }
        state = evolve(state, { type: out.type, data: out.data } as DomainEvent);
        return out;
      });
    },
    wire: (event) => {
      const out = withoutKeys(
        ["session", "turn_state"],
        ["session", "active_request_id"],
        ["session", "active_response_id"],
        ["session", "active_response_turn_id"],
        ["session", "overlap_barge_in_ms"],
        ["session", "playback"],
      )(event);
      if (out.type === "conversation.item.truncated") return withoutKey(out, ["event"]);
      if (out.type === "response.created" && typeof out.response === "object" && out.response !== null) {
        // That release named no modalities of its own: every response was an audio one.
        return {
          ...out,
          response: { ...(out.response as Json), modalities: ["audio", "text"], output_modalities: ["audio"] },
        };
      }
      return out;
    },
  },
  {
    commit: "25f1415",
    summary: "overlap decisions reported on change only (OverlapDecided.reported); truncation of content part 0 only",
    before: (entries) =>
      either(
        () => firstLacks(entries, "OverlapDecided", "reported"),
        () =>
          entries.some((e) => e.type === "ItemTruncated" && (e.data as { contentIndex?: number }).contentIndex !== 0)
            ? true
            : null,
      ),
    upcast: pipe(
      withRule("everyOverlapReported"),
      mapData("OverlapDecided", (d) => ("reported" in d ? d : { ...d, reported: true })),
    ),
  },
  {
    commit: "3692e1a",
    summary: "model profiles and model-facing fields: config.tools, toolChoice, maxResponseOutputTokens, refAudio",
    before: configLacks("tools"),
    upcast: fillConfig({ tools: [], toolChoice: "auto", maxResponseOutputTokens: "inf", refAudio: null }),
    wire: withoutKeys(
      ["session", "ref_audio"],
      ["session", "extra_body", "native_duplex"],
      ["session", "capabilities", "native_duplex"],
      ["session", "capabilities", "profile"],
      ["session", "capabilities", "supports_video_input"],
      ["session", "capabilities", "ref_audio"],
    ),
  },
  {
    commit: "a172ea1",
    summary: "config.nativeDuplex; ResponseEnded.modalities",
    before: (entries) =>
      either(
        () => configLacks("nativeDuplex")(entries),
        () => firstLacks(entries, "ResponseEnded", "modalities"),
      ),
    upcast: pipe(
      fillConfig({ nativeDuplex: true }, "autoResponse"),
      fromResponseStart("modalities", null, (s) => s?.modalities ?? ["audio", "text"]),
    ),
    unreproduced:
      "server VAD asked of a model-native runner without barge-in was taken then (since: unsupported_turn_detection), and response.done judged text-only by what a response produced, not by what it was asked for",
  },
  {
    commit: "6ec247f",
    summary: "session.resumed stands outside server_event_seq",
    before: (entries) => {
      for (const e of entries) {
        const resumed = (e.metadata.wire as { type: string; seq: number | null }[] | undefined)?.find(
          (w) => w.type === "session.resumed",
        );
        if (resumed !== undefined) return resumed.seq !== null;
      }
      return null;
    },
    wireRules: { sequenceResumed: true },
  },
  {
    commit: "0c82f0e",
    summary: "response_timeout_ms (config.responseTimeoutMs, extra_body.response_timeout_ms)",
    before: configLacks("responseTimeoutMs"),
    upcast: fillConfig({ responseTimeoutMs: 30_000 }),
    wire: withoutKeys(["session", "extra_body", "response_timeout_ms"]),
  },
  {
    commit: "4cb232b",
    summary: "a server-VAD commit holds the utterance, not the silence buffered before it",
    before: (entries) =>
      foldSteps(entries, (input, decisions, before) => {
        if (commandOf(input) !== "input_audio_buffer.append") return null;
        let state = before;
        let speechFrom: number | null = null;
        for (const d of decisions) {
          if (d.type === "SpeechStopped") speechFrom = state.input.speechStartMs;
          if (d.type === "InputCommitted" && speechFrom !== null) {
            const { audioMs, clockMs } = d.data as { audioMs: number; clockMs: number };
            const bufferStart = state.input.clockMs - state.input.bufferedMs;
            if (speechFrom > bufferStart) {
              if (audioMs === clockMs - bufferStart) return true;
              if (audioMs === clockMs - speechFrom) return false;
            }
          }
          state = evolve(state, { type: d.type, data: d.data } as DomainEvent);
        }
        return null;
      }),
    upcast: withRule("serverVadCommitsWholeBuffer"),
  },
  {
    commit: "5a45cdf",
    summary:
      "a commit while a response is active is deferred (InputCommitted.responseDeferred, source; ResponseStarted.inReplyTo)",
    before: (entries) => firstLacks(entries, "InputCommitted", "source"),
    upcast: (entries) => {
      let input: RecordedEntry | undefined;
      let committed: unknown = null;
      return withRule("commitDuringResponseUnanswered")(entries).map((e) => {
        const d = e.data as Json;
        if (isInput(e.type)) {
          input = e;
          committed = null;
          return e;
        }
        if (e.type === "InputCommitted") {
          committed = d.itemId;
          if ("source" in d) return e;
          const source = commandOf(input) === "input_audio_buffer.commit" ? "client" : "turn_detection";
          return withData(e, { ...d, responseDeferred: false, source });
        }
        if (e.type === "ResponseStarted" && committed !== null && !("inReplyTo" in d)) {
          return withData(
            e,
            insertAfter(d, "conversation" in d ? "conversation" : "instructions", "inReplyTo", committed),
          );
        }
        return e;
      });
    },
    wire: (event) => {
      const inner = event.event;
      if (event.type !== "input_audio_buffer.committed" || typeof inner !== "object" || inner === null) return event;
      return { ...event, event: withoutKey(inner as Json, ["response_create_deferred"]) };
    },
  },
  {
    commit: "6e96108",
    summary:
      "the assistant message item opens with the first audio or text (MessageStarted); ResponseEnded.messageOutputIndex",
    before: (entries) => firstLacks(entries, "ResponseStarted", "messageLater"),
    upcast: pipe(
      withRule("messageOpensWithResponse"),
      mapData("ResponseEnded", (d) => insertAfter(d, "functionCalls", "messageOutputIndex", 0)),
    ),
  },
  {
    commit: "c073d28",
    summary: "speech events come from server-VAD turn detection only",
    before: (entries) =>
      foldSteps(entries, (_input, decisions, before) => {
        let state = before;
        for (const d of decisions) {
          const data = d.data as { announced?: boolean };
          const detecting = state.config.turnDetection !== null;
          // Without turn detection and with no response, only the old rule announced speech (and only the new one
          // kept quiet); with it, only the old rule let a server-VAD stop go unannounced.
          if (d.type === "SpeechStarted" && !detecting && state.response === null && "announced" in data)
            return data.announced === true;
          if (d.type === "SpeechStopped" && detecting && data.announced === false) return true;
          state = evolve(state, { type: d.type, data: d.data } as DomainEvent);
        }
        return null;
      }),
    upcast: withRule("speechEventsWithoutTurnDetection"),
  },
  {
    commit: "387785c",
    summary:
      "the reference's session fields in force: overlap_short_ack_ms, overlap_barge_in_ms (1200), overlap_silence_rms, speed, tracing; capabilities.supports_speed",
    before: configLacks("overlapShortAckMs"),
    upcast: pipe(
      withRule("bargeInAfterShortAck"),
      fillConfig({ overlapShortAckMs: 700, overlapBargeInMs: 700, overlapSilenceRms: 0.003, speed: 1, tracing: null }),
    ),
    wire: withoutKeys(["session", "capabilities", "supports_speed"]),
    unreproduced:
      "a turn_detection without a type was refused then (unsupported_turn_detection; since: it tunes the detector in force)",
  },
  {
    commit: "1e19abe",
    summary: "a restart gives the new runner the unanswered utterance again (UtteranceResubmitted)",
    before: (entries) =>
      foldSteps(entries, (input, decisions, before) => {
        if (input.type !== "SessionRecovered" && input.type !== "SessionOwned") return null;
        let state = before;
        for (const d of decisions) {
          if (d.type === "UtteranceResubmitted") return false;
          if (d.type === "SessionDetached")
            return state.input.unanswered != null && laneOf(state) === "native" ? true : null;
          state = evolve(state, { type: d.type, data: d.data } as DomainEvent);
        }
        return null;
      }),
    upcast: withRule("noUtteranceResubmitted"),
  },
  {
    // Made after 01b8770 (issue 33, part 2), in the schema-2 era: a log of schema 2 may predate it too.
    commit: "01b8770",
    summary:
      "a restart or takeover gives the new runner the utterance in progress from its start (UtteranceResubmitted{inProgress})",
    sinceSchema: 2,
    // On every read of a schema-2 log (resume, recovery, rebuild): a scan, never a fold (issue 33, part 1's review).
    before: (entries) => {
      for (let i = 0; i < entries.length; i += 1) {
        const type = (entries[i] as RecordedEntry).type;
        if (type !== "SessionRecovered" && type !== "SessionOwned") continue;
        for (let k = i + 1; k < entries.length && !isInput((entries[k] as RecordedEntry).type); k += 1) {
          const d = entries[k] as RecordedEntry;
          if (d.type === "UtteranceResubmitted" && (d.data as { inProgress?: unknown }).inProgress === true)
            return false;
          if (d.type === "SessionDetached") {
            if (speechInProgressBefore(entries, k)) return true;
            break;
          }
        }
      }
      // Only a move shows it: a log without one, or without speech at its moves, reads alike under both rules.
      return null;
    },
    upcast: withRule("noUtteranceCarriedOver"),
  },
  {
    // Made after 8d956f0 (issue 33, part 3), in the schema-2 era.
    commit: "8d956f0",
    summary:
      "a listen that ends a precreated response names it (ModelListened.responseId, response.listen's response_id)",
    sinceSchema: 2,
    // A scan for the field the change added: every ModelListened of today's logs has it, null or not.
    before: (entries) => {
      for (const e of entries) if (e.type === "ModelListened") return !("responseId" in (e.data as Json));
      return null;
    },
    upcast: withRule("listenNamesNoResponse"),
  },
];

/**
 * The changes a log was written before, oldest first: from the oldest one it shows it predates, every later one
 * (history is a line). Empty for a log of today's shape. A log of `schema` is looked at only for the changes made
 * while that schema was in force (`sinceSchema`): those before it are behind any log of it.
 */
export const earlierChangesOf = (entries: readonly RecordedEntry[], schema = 1): readonly EarlierChange[] => {
  const changes = EARLIER_CHANGES.filter((c) => (c.sinceSchema ?? 1) >= schema);
  const at = changes.findIndex((c) => c.before(entries) === true);
  return at < 0 ? [] : changes.slice(at);
};

/**
 * A log of schema 1 (or of `schema`, for the changes made since it came in) in today's shape: each change it predates
 * applied in turn (see the module comment), and each entry written without a hash chain marked with the changes
 * whose wire it was rendered before (`metadata.renderedBefore`, read by `earlierWireJson` and `earlierWireRulesOf`).
 * A log of today's shape comes back as it is. Pure.
 */
export const upcastEarlierReleases = (entries: readonly RecordedEntry[], schema = 1): RecordedEntry[] => {
  const changes = earlierChangesOf(entries, schema);
  if (changes.length === 0) return [...entries];
  const upcast = changes.reduce<RecordedEntry[]>(
    (out, c) => (c.upcast === undefined ? out : c.upcast(out)),
    [...entries],
  );
  const rendered = changes.filter((c) => c.wire !== undefined || c.wireRules !== undefined).map((c) => c.commit);
  if (rendered.length === 0) return upcast;
  return upcast.map((e) =>
    typeof e.metadata.chain === "string" ? e : { ...e, metadata: { ...e.metadata, [RENDERED_BEFORE]: rendered } },
  );
};

/**
 * A server event's JSON text as the release before `commits` sent it: today's text turned by each change's `wire`,
 * newest first. `json` itself when `commits` is empty or absent. @throws SyntaxError when `json` is not JSON.
 */
export const earlierWireJson = (json: string, commits: readonly string[] | undefined): string => {
  const changes = EARLIER_CHANGES.filter((c) => c.wire !== undefined && commits?.includes(c.commit) === true);
  if (changes.length === 0) return json;
  let event = JSON.parse(json) as Json;
  for (const change of [...changes].reverse()) event = (change.wire as (e: Json) => Json)(event);
  return JSON.stringify(event);
};

/** How the release before `commits` numbered its server events (undefined: as today). */
export const earlierWireRulesOf = (commits: readonly string[] | undefined): EarlierWireRules | undefined => {
  let rules: EarlierWireRules | undefined;
  for (const change of EARLIER_CHANGES) {
    if (change.wireRules !== undefined && commits?.includes(change.commit) === true)
      rules = { ...rules, ...change.wireRules };
  }
  return rules;
};
