import { type DomainEvent, emptyLedger, evolve, initialState, laneOf } from "../domain/index.ts";
import type { EarlierChange, Json } from "./earlier-change.ts";
import { CHAIN_ERA_CHANGES } from "./earlier-changes-chain.ts";
import {
  commandOf,
  configLacks,
  configOf,
  either,
  fillConfig,
  first,
  firstLacks,
  foldSteps,
  fromResponseStart,
  insertAfter,
  isInput,
  mapData,
  pipe,
  sentBefore,
  withData,
  withoutKey,
  withoutKeys,
  withRule,
} from "./earlier-log-edits.ts";
import type { RecordedEntry } from "./ports/index.ts";

/** The table below, for the changes whose test reads it (called once the module has loaded). */
const changesSoFar = (): readonly EarlierChange[] => EARLIER_CHANGES;

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
    before: (entries) => sentBefore("9f798cd", changesSoFar)(entries),
    wire: withoutKeys(["session", "input_audio_noise_reduction"]),
  },
  {
    commit: "3c56b6d",
    summary:
      "the session object shows the session's state (SessionConfigured.view); response.created names the response's modalities; conversation.item.truncated carries its event",
    before: (entries) =>
      either(
        () => firstLacks(entries, "SessionConfigured", "view"),
        () => sentBefore("3c56b6d", changesSoFar)(entries),
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
  ...CHAIN_ERA_CHANGES,
];
