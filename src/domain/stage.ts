/**
 * What the model stage emits (DESIGN.md, "Ports": ModelRunner). Every output is stamped with the epoch of the unit
 * it answers; output of an older epoch is dropped by the decider (BEHAVIOUR.md, "Identity").
 */
export type StageOutput =
  | { readonly kind: "speak"; readonly epoch: number }
  | { readonly kind: "listen"; readonly epoch: number; readonly reason: string }
  | {
      readonly kind: "audio";
      readonly epoch: number;
      /** PCM16 little-endian mono at the session's output rate (bytes). */
      readonly audio: Uint8Array;
      /** The transcript text of this chunk (may be empty). */
      readonly transcript: string;
    }
  | {
      readonly kind: "text";
      readonly epoch: number;
      /** A text delta of a text-modality response. */
      readonly text: string;
    }
  | {
      readonly kind: "tool_call";
      readonly epoch: number;
      /** Null when the model's call is malformed (rendered as `duplex.function_call.done`). */
      readonly callId: string | null;
      readonly name: string | null;
      /** The arguments as the model wrote them (JSON text, maybe invalid). */
      readonly arguments: string;
    }
  | {
      readonly kind: "input_transcript";
      readonly epoch: number;
      /** What the model heard in the last committed user item. */
      readonly transcript: string;
    }
  | { readonly kind: "end_of_turn"; readonly epoch: number }
  | { readonly kind: "failure"; readonly epoch: number; readonly message: string };

/** Work the engine hands to the model stage, derived from domain events (see effects.ts). */
export type RunnerUnit =
  | {
      readonly kind: "append";
      readonly epoch: number;
      /** PCM16 mono at the runner's input rate (bytes). */
      readonly audio: Uint8Array;
      /** Input clock (ms) at the start of this audio. */
      readonly startMs: number;
      /** Server VAD annotations of this append (reference: the annotated append). */
      readonly vad: {
        readonly speechStartedAtMs: number | null;
        readonly speechStoppedAtMs: number | null;
        readonly speechActive: boolean;
      };
    }
  | { readonly kind: "commit"; readonly epoch: number }
  | {
      readonly kind: "respond";
      readonly epoch: number;
      readonly instructions: string | null;
      /** What the response should contain: audio (with its transcript) or text only. */
      readonly modalities: readonly ("audio" | "text")[];
    }
  | { readonly kind: "text"; readonly epoch: number; readonly text: string }
  | { readonly kind: "clear"; readonly epoch: number };
