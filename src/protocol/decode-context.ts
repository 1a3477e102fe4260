/** What decoding a client frame needs to know of its session: the declared input format, and that format in the codec's spelling. */
import type { AudioFormat } from "../domain/index.ts";
import type { WireAudioFormat } from "./audio-formats.ts";

/**
 * What decoding needs to know of the session: its declared input format and rate (Hz). `inputAudio` absent means
 * pcm16 at `inputRateHz`. The server passes the session's `config.inputAudio` once it has a session, so that appends
 * without a `format` are read in the format the session declared.
 */
export interface DecodeContext {
  readonly inputRateHz: number;
  readonly inputAudio?: AudioFormat | undefined;
}

/** The session's input format in the codec's spelling. */
export const inputFormatOf = (ctx: DecodeContext): WireAudioFormat =>
  ctx.inputAudio === undefined
    ? { encoding: "pcm16", rate: ctx.inputRateHz }
    : { encoding: ctx.inputAudio.format, rate: ctx.inputAudio.rate };
