import type { ClientCase, GraderName } from "./cases.ts";

/**
 * What the client's app must send during a case (issue 33, part 5), as `duplex conform --client` prints it and the
 * README's "Grade your client" says: the microphone's file, whether it turns on server VAD, and what it must do
 * (the case's `asks`). The file follows from the case's grader: the tone for `audio-rate`, the question then the
 * interruption for `barge-in`, the question for every other.
 */
export interface AppInput {
  /**
   * The files the app streams as its microphone, in order, mono PCM16 WAV: names under ../shared/audio, or
   * `tone.wav`, which `duplex conform --client` writes into its report folder.
   */
  readonly files: readonly string[];
  /**
   * Whether the app asks for server VAD (`turn_detection: {type: "server_vad"}`); otherwise it leaves
   * `turn_detection` unset, and the peer's model answers by itself (the model-native lane).
   */
  readonly serverVad: boolean;
  /** What the app must do, in the case's words (`asks`). */
  readonly does: string;
}

const QUESTION = "question_16k.wav";

/** The microphone and turn detection each grader's case needs. */
const BY_GRADER: Record<GraderName, { readonly files: readonly string[]; readonly serverVad: boolean }> = {
  handshake: { files: [QUESTION], serverVad: false },
  "audio-rate": { files: ["tone.wav"], serverVad: false },
  "forward-compat": { files: [QUESTION], serverVad: false },
  "error-recovery": { files: [QUESTION], serverVad: false },
  "barge-in": { files: [QUESTION, "interrupt_16k.wav"], serverVad: true },
  playback: { files: [QUESTION], serverVad: false },
  resume: { files: [QUESTION], serverVad: false },
  "no-retry": { files: [QUESTION], serverVad: false },
  lease: { files: [QUESTION], serverVad: false },
};

/** What the app must send during `clientCase`. */
export const appInputOf = (clientCase: ClientCase): AppInput => ({
  ...BY_GRADER[clientCase.grader],
  does: clientCase.asks,
});

/**
 * The lines `duplex conform --client` prints for a case: its id, whether every client must pass it, the files
 * (`tone.wav` at `tonePath`, the others under `audioDir`), server VAD on or off, then what the app must do.
 */
export const describeAppInput = (clientCase: ClientCase, audioDir: string, tonePath: string): string => {
  const input = appInputOf(clientCase);
  const files = input.files
    .map((f) => (f === "tone.wav" ? tonePath : `${audioDir.replace(/\/+$/, "")}/${f}`))
    .join(", then ");
  const vad = input.serverVad
    ? 'server VAD on (turn_detection: {type: "server_vad"})'
    : "server VAD off (turn_detection unset)";
  const who = clientCase.required === "all" ? "every client" : "duplex-aware";
  return `  ${clientCase.id.padEnd(22)} ${who.padEnd(13)} send ${files}; ${vad}\n${" ".repeat(39)}${input.does}\n`;
};
