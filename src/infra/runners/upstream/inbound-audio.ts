/**
 * The upstream's speech as stage outputs: audio deltas paired with the transcript delta that follows them (the
 * duplex contract pairs them one to one; transcript text that comes ahead of its audio, as OpenAI streams it, rides
 * the next chunk), resampled to 24 kHz, continuously across chunks, when the upstream speaks at another rate, with a
 * sample split across two deltas joined.
 */
import type { StageOutput } from "../../../domain/index.ts";
import { createResampler, pcm16FromBytes, pcm16ToBytes, type StreamResampler } from "../../audio/index.ts";
import { type Json, str } from "./wire-json.ts";

/** The rate the runner gives the engine (Hz). */
export const OUTPUT_RATE = 24000;

/** One session's inbound speech. */
export interface InboundAudio {
  /**
   * An audio delta (`response.output_audio.delta`, beta `response.audio.delta`), stamped `epoch`; the chunk before it
   * goes out without more text.
   * @throws Error when its `sample_rate_hz` is no audio rate (8000..192000 Hz, an integer).
   */
  delta(type: string, event: Json, epoch: number): void;
  /** A transcript delta: it goes out with the chunk waiting, else waits for the next one. */
  transcript(text: string): void;
  /** The end of a response's audio: the last chunk goes out with whatever text is left (on an empty one if none). */
  end(epoch: number): void;
  /** Forgets the chunk waiting for its transcript: its epoch was aborted. */
  abort(): void;
}

/** The inbound speech of one session, emitted to `emit`. */
export const createInboundAudio = (emit: (output: StageOutput) => void): InboundAudio => {
  let pendingAudio: { audio: Uint8Array; epoch: number } | null = null;
  /**
   * Transcript text that came before its audio (an OpenAI server streams the two independently, often the text
   * first): it rides the next audio chunk, and what is left when the audio ends goes out on an empty chunk.
   */
  let transcriptAhead = "";
  /** The upstream's audio rate and a streaming resampler to 24 kHz (continuous across chunks), and an odd byte. */
  let fromUpstream: { rate: number; resampler: StreamResampler } | null = null;
  let oddByte: number | null = null;

  const flush = (transcript: string): void => {
    if (pendingAudio === null) return;
    emit({
      kind: "audio",
      epoch: pendingAudio.epoch,
      audio: pendingAudio.audio,
      transcript: transcriptAhead + transcript,
    });
    transcriptAhead = "";
    pendingAudio = null;
  };

  return {
    delta(type, event, epoch) {
      flush("");
      const rate = event.sample_rate_hz === undefined ? OUTPUT_RATE : event.sample_rate_hz;
      if (typeof rate !== "number" || !Number.isInteger(rate) || rate < 8000 || rate > 192000) {
        throw new Error(`${type} has sample_rate_hz ${JSON.stringify(rate)}: not an audio rate`);
      }
      let bytes = Uint8Array.from(Buffer.from(str(event.delta) ?? "", "base64"));
      // A sample split across two deltas is joined, not refused.
      if (oddByte !== null) bytes = Uint8Array.from([oddByte, ...bytes]);
      oddByte = bytes.byteLength % 2 === 1 ? (bytes[bytes.byteLength - 1] ?? 0) : null;
      if (oddByte !== null) bytes = bytes.subarray(0, bytes.byteLength - 1);
      if (rate !== OUTPUT_RATE && fromUpstream?.rate !== rate) {
        fromUpstream = { rate, resampler: createResampler(rate, OUTPUT_RATE) };
      }
      const audio =
        rate === OUTPUT_RATE
          ? bytes
          : pcm16ToBytes(fromUpstream?.resampler.push(pcm16FromBytes(bytes)) ?? new Int16Array(0));
      pendingAudio = { audio, epoch };
    },
    transcript(text) {
      if (pendingAudio !== null) flush(text);
      else transcriptAhead += text;
    },
    end(epoch) {
      if (pendingAudio !== null) flush("");
      else if (transcriptAhead !== "") {
        emit({ kind: "audio", epoch, audio: new Uint8Array(0), transcript: transcriptAhead });
        transcriptAhead = "";
      }
      oddByte = null;
    },
    abort() {
      pendingAudio = null;
    },
  };
};
