import {
  type DomainEvent,
  type HistoryItem,
  historyItemOf,
  type Input,
  type ItemId,
  type RefAudioInput,
  type ResponseCreate,
  type RunnerUnit,
  type SessionConfig,
  type SessionState,
} from "../domain/index.ts";

/**
 * What the engine does after a decision is appended (DESIGN.md, "How data flows": effects derived from events).
 * `configure.refAudio` is the clip a `session.update` set (null: removed), absent when the update left it alone.
 */
export type Effect =
  | { readonly kind: "submit"; readonly unit: RunnerUnit }
  | { readonly kind: "abort"; readonly epoch: number }
  | { readonly kind: "configure"; readonly config: SessionConfig; readonly refAudio?: RefAudioInput | null }
  /**
   * The logged appends of an utterance the model never answered, or of one still in progress, from `fromMs` to
   * `toMs` on the input clock, go to the runner again (its runner lost its work: a restart, a takeover, a failed
   * append). The host has them from the log.
   */
  | { readonly kind: "resubmit"; readonly fromMs: number; readonly toMs: number }
  | { readonly kind: "close" };

/** The `response.create` an input carried, if it was one. */
const responseCreateOf = (input: Input): ResponseCreate | null =>
  input.type === "CommandReceived" && input.data.command.type === "response.create" ? input.data.command : null;

/** `response.input` as history items: references resolved against the conversation, given items under derived ids. */
const responseInputOf = (
  create: ResponseCreate | null,
  history: readonly HistoryItem[],
  responseId: string,
): HistoryItem[] | null =>
  create?.input === undefined || create.input === null
    ? null
    : create.input.flatMap((item, i) => {
        if (item.type !== "item_reference") return [historyItemOf(`${responseId}_input${i}` as ItemId, item)];
        const found = history.find((h) => h.id === item.id);
        return found === undefined ? [] : [found];
      });

/**
 * Derives the effects of one input's decision. Pure: `before` is the state the input was decided on, `after` the
 * state its events led to.
 */
export const effectsOf = (
  input: Input,
  events: readonly DomainEvent[],
  before: SessionState,
  after: SessionState,
): Effect[] => {
  const effects: Effect[] = [];
  const started = events.find((e) => e.type === "SpeechStarted");
  const stopped = events.find((e) => e.type === "SpeechStopped");
  for (const event of events) {
    switch (event.type) {
      case "AudioBuffered":
        if (input.type === "CommandReceived" && input.data.command.type === "input_audio_buffer.append") {
          effects.push({
            kind: "submit",
            unit: {
              kind: "append",
              epoch: after.epoch,
              audio: input.data.command.audio,
              startMs: before.input.clockMs,
              vad: {
                speechStartedAtMs: started?.type === "SpeechStarted" ? started.data.audioStartMs : null,
                speechStoppedAtMs: stopped?.type === "SpeechStopped" ? stopped.data.audioEndMs : null,
                speechActive: event.data.endpointer.phase === "speech",
              },
              ...(input.data.command.videoFrames === undefined || input.data.command.videoFrames.length === 0
                ? {}
                : { videoFrames: input.data.command.videoFrames }),
            },
          });
        }
        break;
      case "InputCommitted":
        effects.push({ kind: "submit", unit: { kind: "commit", epoch: after.epoch, itemId: event.data.itemId } });
        break;
      case "ResponseStarted":
        if (event.data.source !== "model") {
          const create = responseCreateOf(input);
          effects.push({
            kind: "submit",
            unit: {
              kind: "respond",
              epoch: after.epoch,
              responseId: event.data.responseId,
              instructions: event.data.instructions,
              modalities: event.data.modalities,
              conversation: event.data.conversation ?? "auto",
              input: responseInputOf(create, before.history, event.data.responseId),
              metadata: event.data.metadata,
              tools: create?.tools ?? after.config.tools,
              toolChoice: create?.toolChoice ?? after.config.toolChoice,
              temperature: create?.temperature ?? after.config.temperature,
              maxOutputTokens: create?.maxOutputTokens ?? after.config.maxResponseOutputTokens,
              inReplyTo: event.data.inReplyTo ?? null,
            },
          });
        }
        break;
      case "EpochAdvanced":
        effects.push({ kind: "abort", epoch: event.data.epoch });
        break;
      case "InputTextAppended":
        effects.push({ kind: "submit", unit: { kind: "text", epoch: after.epoch, text: event.data.text } });
        break;
      case "ItemCreated":
        if (event.data.item.type === "function_call_output") {
          effects.push({
            kind: "submit",
            unit: {
              kind: "function_call_output",
              epoch: after.epoch,
              itemId: event.data.item.id,
              callId: event.data.item.callId ?? "",
              output: event.data.item.output ?? "",
            },
          });
        } else if (event.data.item.text !== "" && event.data.item.role !== "assistant") {
          effects.push({ kind: "submit", unit: { kind: "text", epoch: after.epoch, text: event.data.item.text } });
        } else if (event.data.item.type === "message" && event.data.item.role === "assistant") {
          // The model's own earlier words, as the client says them (issue 33, part 4): it keeps them, answers none.
          effects.push({ kind: "submit", unit: { kind: "item", epoch: after.epoch, item: event.data.item } });
        }
        break;
      case "PlaybackAcknowledged":
        effects.push({
          kind: "submit",
          unit: {
            kind: "playback",
            epoch: after.epoch,
            responseId: event.data.responseId,
            playedMs: event.data.playedMs,
            committedMs: event.data.committedMs,
            truncate: event.data.truncate,
          },
        });
        break;
      case "ItemTruncated": {
        const responseId = after.audio[event.data.itemId]?.responseId;
        if (responseId !== undefined) {
          effects.push({
            kind: "submit",
            unit: {
              kind: "playback",
              epoch: after.epoch,
              responseId,
              playedMs: event.data.audioEndMs,
              committedMs: event.data.audioEndMs,
              truncate: true,
            },
          });
        }
        break;
      }
      case "InputCleared":
        effects.push({ kind: "submit", unit: { kind: "clear", epoch: after.epoch } });
        break;
      case "SessionConfigured": {
        const patch =
          input.type === "CommandReceived" && input.data.command.type === "session.update"
            ? input.data.command.patch
            : null;
        effects.push(
          patch?.refAudio === undefined
            ? { kind: "configure", config: event.data.config }
            : { kind: "configure", config: event.data.config, refAudio: patch.refAudio },
        );
        break;
      }
      case "UtteranceResubmitted":
        effects.push({ kind: "resubmit", fromMs: event.data.audioStartMs, toMs: event.data.audioEndMs });
        break;
      case "SessionClosed":
        effects.push({ kind: "close" });
        break;
      default:
        break;
    }
  }
  return effects;
};
