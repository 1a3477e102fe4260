import type { DomainEvent, Input, RunnerUnit, SessionConfig, SessionState } from "../domain/index.ts";

/** What the engine does after a decision is appended (DESIGN.md, "How data flows": effects derived from events). */
export type Effect =
  | { readonly kind: "submit"; readonly unit: RunnerUnit }
  | { readonly kind: "abort"; readonly epoch: number }
  | { readonly kind: "configure"; readonly config: SessionConfig }
  | { readonly kind: "close" };

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
            },
          });
        }
        break;
      case "InputCommitted":
        effects.push({ kind: "submit", unit: { kind: "commit", epoch: after.epoch } });
        break;
      case "ResponseStarted":
        if (event.data.source !== "model") {
          effects.push({
            kind: "submit",
            unit: {
              kind: "respond",
              epoch: after.epoch,
              instructions: event.data.instructions,
              modalities: event.data.modalities,
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
        if (event.data.item.text !== "" && event.data.item.role !== "assistant") {
          effects.push({ kind: "submit", unit: { kind: "text", epoch: after.epoch, text: event.data.item.text } });
        }
        break;
      case "InputCleared":
        effects.push({ kind: "submit", unit: { kind: "clear", epoch: after.epoch } });
        break;
      case "SessionConfigured":
        effects.push({ kind: "configure", config: event.data.config });
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
