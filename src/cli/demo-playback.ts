import { join } from "node:path";
import type { DuplexClient, ResponseHandle } from "../client/index.ts";
import { pcm16FromBytes, writeWavFile } from "../infra/audio/index.ts";

/** ms as seconds with one decimal, for progress lines. */
export const seconds = (ms: unknown): string => `${(Number(ms) / 1000).toFixed(1)} s`;

/** A response as the demo heard it: its handle, its audio (PCM16 chunks) and how much of it was acked (ms). */
interface ResponseAudio {
  readonly handle: ResponseHandle;
  readonly chunks: Int16Array[];
  ackedMs: number;
  /** Cut (barge-in, cancel): its playback stopped where it stood, and was reported once. */
  stopped: boolean;
}

/**
 * `duplex demo`'s player (src/cli/demo.ts): keeps each response's audio and "plays" it by sending `playback.ack` at
 * real-time pace from its first delta (`fast`: all of it at once); a cut response stops where it stands, with one
 * last ack of what was played (reference, "Barge-in"). Then writes each response as response-N.wav.
 */
export class DemoPlayback {
  readonly responses: ResponseAudio[] = [];

  constructor(
    private readonly client: DuplexClient,
    private readonly fast: boolean,
  ) {
    client.onResponse((handle) => {
      const r: ResponseAudio = { handle, chunks: [], ackedMs: 0, stopped: false };
      handle.onAudio((pcm) => r.chunks.push(pcm16FromBytes(pcm)));
      this.responses.push(r);
    });
  }

  /** ms of `r` played by now: from its first delta at real time, never past what arrived. */
  private playedOf(r: ResponseAudio, now: number): number {
    const { audioMs, firstAudioAt } = r.handle;
    return Math.floor(this.fast || firstAudioAt === null ? audioMs : Math.min(audioMs, now - firstAudioAt));
  }

  private get connected(): boolean {
    return this.client.phase === "open" || this.client.phase === "reconnecting";
  }

  /** Stops playing the response `id` where it stands: one last playback.ack of what was played, and none after it. */
  stop(id: string): void {
    const r = this.responses.find((one) => one.handle.responseId === id);
    if (r === undefined || r.stopped || r.handle.firstAudioAt === null) return;
    r.stopped = true;
    r.ackedMs = Math.max(r.ackedMs, this.playedOf(r, performance.now()));
    if (this.connected) this.client.ackPlayback(id, r.ackedMs);
  }

  /** Acks what each response still playing has played since its last ack. */
  ack(): void {
    if (!this.connected) return;
    const now = performance.now();
    for (const r of this.responses) {
      const { firstAudioAt, responseId } = r.handle;
      if (firstAudioAt === null || responseId === null || r.stopped) continue;
      const played = this.playedOf(r, now);
      if (played > r.ackedMs) {
        r.ackedMs = played;
        this.client.ackPlayback(responseId, played);
      }
    }
  }

  /** Whether a response is still streaming, or not yet played to its end. */
  get playing(): boolean {
    return this.responses.some(
      (r) => r.handle.phase === "streaming" || (!r.stopped && r.ackedMs < Math.floor(r.handle.audioMs)),
    );
  }

  /** Writes response-N.wav (N from 1) in `out` for each response, at its rate; returns the files in order. */
  async write(out: string, say: (line: string) => void): Promise<string[]> {
    const files: string[] = [];
    for (const [i, r] of this.responses.entries()) {
      const total = r.chunks.reduce((n, c) => n + c.length, 0);
      const pcm = new Int16Array(total);
      let offset = 0;
      for (const c of r.chunks) {
        pcm.set(c, offset);
        offset += c.length;
      }
      const outputRate = r.handle.sampleRateHz;
      const file = join(out, `response-${i + 1}.wav`);
      await writeWavFile(file, pcm, outputRate);
      files.push(file);
      say(`wrote ${file} (${(((total / outputRate) * 1000) / 1000).toFixed(1)} s)`);
    }
    return files;
  }
}

/** Says what the server does as it happens (speech, responses, drops, errors), and stops playback on a cut. */
export const narrate = (client: DuplexClient, playback: DemoPlayback, say: (line: string) => void): void => {
  client.onEvent((event) => {
    switch (event.type) {
      case "input_audio_buffer.speech_started":
        say(`the server heard speech start at ${seconds(event.audio_start_ms)}`);
        return;
      case "input_audio_buffer.speech_stopped":
        say(`the server heard speech stop at ${seconds(event.audio_end_ms)}`);
        return;
      case "response.created":
        say(`response ${String((event.response as { id?: string }).id)} started`);
        return;
      case "output_audio_buffer.cleared":
        // The server cut the answer (a barge-in): its playback stops now, and what was played is reported.
        playback.stop(String(event.response_id ?? ""));
        return;
      case "response.done": {
        const r = event.response as { id?: string; status?: string; status_details?: { reason?: string } | null };
        if (r.status === "cancelled") playback.stop(String(r.id ?? ""));
        const transcript = client.events
          .events()
          .findLast((e) => e.type === "response.output_audio_transcript.done" && e.response_id === r.id)?.transcript;
        const why = r.status === "completed" ? "" : ` (${r.status_details?.reason ?? ""})`;
        say(`response ${r.id} ${r.status}${why}${transcript === undefined ? "" : `: "${String(transcript)}"`}`);
        return;
      }
      case "connection.resumed":
        say(
          `connection dropped (${String(event.close_code)}); resumed after seq ${String(event.last_received_server_event_seq)}`,
        );
        return;
      case "error": {
        const e = event.error as { code?: string; message?: string } | string;
        say(typeof e === "string" ? `error ${String(event.code)}: ${e}` : `error ${e?.code}: ${e?.message}`);
        return;
      }
      default:
    }
  });
};
