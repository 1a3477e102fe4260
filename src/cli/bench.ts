import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import Database from "better-sqlite3";
import { CHAIN_GENESIS, chained, streamOf } from "../engine/index.ts";
import { readWavFile } from "../infra/audio/index.ts";
import { parseConfig } from "../infra/config.ts";
import { packBlob, unpackBlob } from "../infra/event-store/blob-packing.ts";
import { createSqliteEventStore, readSessionFile } from "../infra/event-store/index.ts";
import { packText, unpackText } from "../infra/event-store/text-packing.ts";
import { createSileroVad } from "../infra/vad/index.ts";
import { replayEntries } from "../replay/index.ts";
import { startServer } from "../server/index.ts";
import { benchFlood } from "./bench-flood.ts";
import { benchIdle } from "./bench-idle.ts";
import { benchSlowReader } from "./bench-slow-reader.ts";
import { benchSoak } from "./bench-soak.ts";
import { benchStart } from "./bench-start.ts";
import { runDemo } from "./demo.ts";

/**
 * `duplex bench`: speed and memory figures, printed as one JSON line per measurement. Absolute times drift between
 * machines, so each figure comes with a ratio against a baseline measured in the same run (real time, a raw
 * sqlite insert, one session alone).
 */
export interface BenchOptions {
  readonly audioDir: string;
  readonly sessions: number;
  /** The soak bench: seconds of audio streamed into one session, and its lane. */
  readonly soakSeconds?: number;
  readonly soakLane?: "native" | "turn";
  readonly soakPace?: "fast" | "realtime";
  readonly soakPattern?: "stream" | "conversation";
  /** Sessions the idle bench opens (200). */
  readonly idleSessions?: number;
  /** The postgres bench: a server to use (absent: a throwaway one), and seconds of each pgbench comparison (5). */
  readonly postgresUrl?: string;
  readonly postgresSeconds?: number;
  readonly print: (line: Record<string, unknown>) => void;
}

const ms = (from: number): number => Math.round((performance.now() - from) * 10) / 10;

/** Silero VAD on jfk_16k.wav in 100 ms pushes: frames per second and how many times faster than real time. */
const benchVad = async (o: BenchOptions): Promise<void> => {
  const wav = await readWavFile(join(o.audioDir, "jfk_16k.wav"));
  const vad = await createSileroVad();
  const stream = vad.createStream();
  const started = performance.now();
  let frames = 0;
  for (let i = 0; i < wav.samples.length; i += 1600)
    frames += (await stream.process(wav.samples.subarray(i, i + 1600))).length;
  const took = ms(started);
  await vad.close();
  const audioMs = (wav.samples.length / 16000) * 1000;
  o.print({
    bench: "vad",
    meaning: "Silero VAD on one core: frames_per_s and x_real_time (audio time per wall time), higher is better",
    frames,
    ms: took,
    frames_per_s: Math.round((frames / took) * 1000),
    x_real_time: Math.round(audioMs / took),
  });
};

/**
 * What packing costs the writer thread (issue 24): microseconds to pack and unpack 100 ms chunks of real 16 kHz speech
 * (speech_60s_16k.wav, 200 chunks, after one pass of warm-up) and an AudioBuffered entry's texts, with the share of
 * bytes each keeps.
 */
const packingFigures = async (audioDir: string): Promise<Record<string, number>> => {
  const speech = (await readWavFile(join(audioDir, "speech_60s_16k.wav"))).samples;
  const chunks = Array.from(
    { length: 200 },
    (_, k) => new Uint8Array(speech.buffer, speech.byteOffset + k * 3200, 3200),
  );
  const json =
    '{"durationMs":100,"bytes":3200,"clockMs":299900,"vadFrames":9371,"endpointer":{"phase":"speech","runStartMs":null,"silenceStartMs":299808,"floorMs":290432}}';
  const metadata =
    '{"at":1796184420623,"epoch":0,"turnId":26,"wire":[],"chain":"024de8836994c4b7ef7657dc93ac6eac11505e1924e7ae29920b91fd235cc381"}';
  const timeUs = (passes: number, work: () => void): number => {
    work();
    const started = performance.now();
    for (let p = 0; p < passes; p += 1) work();
    return ((performance.now() - started) * 1000) / passes;
  };
  const packed = chunks.map((chunk) => packBlob(chunk));
  const text = packText(json, metadata);
  const round = (x: number): number => Math.round(x * 10) / 10;
  return {
    pack_audio_us_per_100ms: round(
      timeUs(5, () => {
        for (const c of chunks) packBlob(c);
      }) / chunks.length,
    ),
    unpack_audio_us_per_100ms: round(
      timeUs(5, () => {
        for (const p of packed) unpackBlob(p.bytes, p.codec);
      }) / chunks.length,
    ),
    audio_kept_share: Math.round((packed.reduce((n, p) => n + p.bytes.byteLength, 0) / (3200 * 200)) * 1000) / 1000,
    pack_text_us_per_entry: round(timeUs(2000, () => packText(json, metadata))),
    unpack_text_us_per_entry: round(text === null ? 0 : timeUs(2000, () => unpackText(text.bytes, "", text.codec))),
    text_kept_share:
      Math.round(((text?.bytes.byteLength ?? 0) / Buffer.byteLength(`${json}\n${metadata}`)) * 1000) / 1000,
  };
};

/** Appends of one entry with 3200 bytes of audio (100 ms at 16 kHz), against raw better-sqlite3 inserts. */
const benchStore = async (o: BenchOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-bench-"));
  const n = 5000;
  const audio = new Uint8Array(3200).fill(7);
  try {
    const raw = new Database(join(dir, "raw.sqlite"));
    raw.pragma("journal_mode = WAL");
    raw.pragma("synchronous = NORMAL");
    raw.exec(
      "CREATE TABLE e (position INTEGER PRIMARY KEY, stream TEXT, revision INTEGER, type TEXT, data TEXT, bin BLOB)",
    );
    const insert = raw.prepare("INSERT INTO e (stream, revision, type, data, bin) VALUES (?, ?, ?, ?, ?)");
    let started = performance.now();
    for (let i = 0; i < n; i += 1) insert.run("s", i, "CommandReceived", '{"audio":{"$bin":[0,3200]}}', audio);
    const rawMs = ms(started);
    raw.close();
    const store = createSqliteEventStore({ path: join(dir, "store.sqlite") });
    started = performance.now();
    for (let i = 0; i < n; i += 1) {
      await store.append(
        "session-bench",
        [{ type: "CommandReceived", data: { audio }, metadata: { at: i, epoch: 0, turnId: 0 } }],
        i - 1 < 0 ? "no_stream" : i - 1,
      );
    }
    const storeMs = ms(started);
    // Group commit (issue 11): sessions appending at once, each its own stream, each waiting for its last append
    // (a drain: the input, with 3.2 kB of audio, and two decisions), as the engine's sessions do.
    const sessions = 200;
    const drains = 25;
    // Real speech, 100 ms a drain: packing it is most of the writer's work (constant bytes would pack for nothing).
    const speech = (await readWavFile(join(o.audioDir, "jfk_16k.wav"))).samples;
    const chunkOf = (k: number): Uint8Array => {
      const from = (k * 1600) % (speech.length - 1600);
      return new Uint8Array(speech.slice(from, from + 1600).buffer);
    };
    started = performance.now();
    await Promise.all(
      Array.from({ length: sessions }, async (_, k) => {
        for (let i = 0; i < drains; i += 1) {
          const metadata = { at: i, epoch: 0, turnId: 0 };
          await store.append(
            `session-group-${k}`,
            [
              {
                type: "CommandReceived",
                data: { command: { type: "append", audio: chunkOf(k * drains + i) } },
                metadata,
              },
              { type: "AudioAppended", data: { ms: 100 }, metadata },
              { type: "SpeechProbability", data: { vad: [0.1, 0.2, 0.3] }, metadata },
            ],
            i === 0 ? "no_stream" : i * 3 - 1,
          );
        }
      }),
    );
    const groupMs = ms(started);
    await store.close();
    // The hash chain (issue 20, part 4): what chaining the same drains costs on the event loop, per entry.
    const drainsToChain = Array.from({ length: sessions * drains }, (_, k) => {
      const metadata = { at: k, epoch: 0, turnId: 0 };
      return [
        { type: "CommandReceived", data: { command: { type: "append", audio: chunkOf(k) } }, metadata },
        { type: "AudioAppended", data: { ms: 100 }, metadata },
        { type: "SpeechProbability", data: { vad: [0.1, 0.2, 0.3] }, metadata },
      ];
    });
    started = performance.now();
    let head = CHAIN_GENESIS;
    for (const drain of drainsToChain) head = chained(head, drain).head;
    const chainMs = ms(started);
    const packing = await packingFigures(o.audioDir);
    o.print({
      bench: "store_append",
      meaning:
        "single-entry appends with 3.2 kB of audio, one after another: entries_per_s, higher is better; ratio_to_raw = our time / raw better-sqlite3 inserts, lower is better (1 = no overhead); group_*: 200 sessions appending at once, 3 entries a drain (one with 100 ms of jfk_16k.wav, 3.2 kB), each waiting for its last: entries per second through group commit, higher is better; pack_*/unpack_*: us to pack and unpack 100 ms of real 16 kHz speech and an AudioBuffered entry's texts on one thread, against raw_insert_us_per_entry, and the share of bytes each keeps, lower is better; chain_*: the hash chain over the same drains on the event loop, us per entry and as a share of the group append's time, lower is better",
      appends: n,
      entries_per_s: Math.round((n / storeMs) * 1000),
      raw_inserts_per_s: Math.round((n / rawMs) * 1000),
      ratio_to_raw: Math.round((storeMs / rawMs) * 100) / 100,
      group_sessions: sessions,
      group_entries: sessions * drains * 3,
      group_entries_per_s: Math.round(((sessions * drains * 3) / groupMs) * 1000),
      chain_us_per_entry: Math.round(((chainMs * 1000) / (sessions * drains * 3)) * 10) / 10,
      chain_share_of_group_append: Math.round((chainMs / groupMs) * 1000) / 1000,
      raw_insert_us_per_entry: Math.round(((rawMs * 1000) / n) * 10) / 10,
      ...packing,
    });
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
};

/** Offline replay of the recorded sessions under replays/: decisions per second and times faster than real time. */
const benchReplay = async (o: BenchOptions): Promise<void> => {
  const dir = fileURLToPath(new URL("../../replays", import.meta.url));
  const files = (await readdir(dir)).filter((f) => f.endsWith(".jsonl"));
  const recorded = await Promise.all(files.map(async (file) => (await readSessionFile(join(dir, file))).entries));
  // One pass over every file first, so the first file's time is not the JIT's warm-up of the replay code.
  for (const entries of recorded) replayEntries(entries);
  for (const [i, file] of files.entries()) {
    const entries = recorded[i] ?? [];
    // A session's real time is its clock's span, or the audio it carried where it was recorded faster than that
    // (barge-in-resume streams its audio as fast as the socket takes it).
    const clockMs = (entries.at(-1)?.metadata.at ?? 0) - (entries[0]?.metadata.at ?? 0);
    const audioMs = entries.reduce(
      (sum, e) => sum + (e.type === "AudioBuffered" ? Number((e.data as { durationMs?: number }).durationMs ?? 0) : 0),
      0,
    );
    const sessionMs = Math.max(clockMs, audioMs);
    const times: number[] = [];
    let result = replayEntries(entries);
    for (let run = 0; run < 5; run += 1) {
      const started = performance.now();
      result = replayEntries(entries);
      times.push(ms(started));
    }
    const took = times.sort((a, b) => a - b)[2] ?? 0;
    o.print({
      bench: "replay",
      meaning:
        "offline replay of a recorded session, the median of 5 runs after a warm-up pass over every file: decisions_per_s and x_real_time (session time per replay time; session time = the log's clock span, or the input audio it buffered where that is longer), higher is better",
      file,
      ok: result.ok,
      decisions: result.decisions,
      session_ms: sessionMs,
      ms: took,
      decisions_per_s: Math.round((result.decisions / took) * 1000),
      x_real_time: Math.round(sessionMs / took),
    });
  }
};

/**
 * One session alone, then `sessions` at once, each streaming jfk_16k.wav through the demo flow as fast as possible
 * against an in-process server: latency to the first audio, wall time, and the resident memory they add.
 */
const benchSessions = async (o: BenchOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-bench-"));
  const config = parseConfig({
    log_level: "silent",
    listen: { host: "127.0.0.1", port: 0 },
    event_store: { kind: "sqlite", path: join(dir, "duplex.sqlite") },
    duplex_session: { max_sessions: Math.max(4, o.sessions) },
  });
  const server = await startServer(config);
  try {
    const run = async (count: number) => {
      const rss = process.memoryUsage().rss;
      const started = performance.now();
      const results = await Promise.all(
        Array.from({ length: count }, (_, i) =>
          runDemo({
            url: server.url,
            input: join(o.audioDir, "jfk_16k.wav"),
            out: join(dir, `out-${count}-${i}`),
            fast: true,
          }),
        ),
      );
      const latencies = results.map((r) => r.first_audio_after_speech_end_ms ?? Number.NaN).sort((a, b) => a - b);
      return {
        wall: ms(started),
        latency: latencies[Math.floor(latencies.length / 2)] ?? Number.NaN,
        rssMb: (process.memoryUsage().rss - rss) / 2 ** 20,
        results,
      };
    };
    const one = await run(1);
    const many = await run(o.sessions);
    const replayed = await server.store.read(streamOf(many.results[0]?.session_id ?? ""));
    o.print({
      bench: "sessions",
      meaning:
        "N concurrent fast demos against one alone: latency_ratio (median first audio after the end of speech, as the demo measures it, N vs 1) lower is better; wall_ratio_per_session below 1 means the sessions overlap",
      sessions: o.sessions,
      median_first_audio_after_speech_end_ms: many.latency,
      median_first_audio_after_speech_end_ms_alone: one.latency,
      latency_ratio: Math.round((many.latency / one.latency) * 100) / 100,
      wall_ms: many.wall,
      wall_ms_alone: one.wall,
      wall_ratio_per_session: Math.round((many.wall / o.sessions / one.wall) * 100) / 100,
      rss_added_mb: Math.round(many.rssMb),
      log_entries_per_session: replayed.length,
      replay_identical: replayEntries(replayed).ok,
    });
  } finally {
    await server.close();
    await rm(dir, { recursive: true, force: true });
  }
};

/**
 * Benches that run only when named: the soak streams for minutes, the slow reader floods a socket, idle opens many,
 * flood sends 40,000 frames,
 * postgres needs a PostgreSQL server (a throwaway one, or `--postgres-url`), list stores 10,000 sessions and folds
 * them all the old way (about a minute).
 */
const ON_REQUEST: readonly string[] = ["soak", "slow-reader", "idle", "flood", "postgres", "list"];

/** Runs the benches named in `only` (all but those of `ON_REQUEST` when empty). */
export const runBench = async (o: BenchOptions, only: readonly string[]): Promise<void> => {
  const all: Record<string, (o: BenchOptions) => Promise<void>> = {
    vad: benchVad,
    store: benchStore,
    replay: benchReplay,
    sessions: benchSessions,
    start: (b) => benchStart({ print: b.print }),
    "slow-reader": (b) => benchSlowReader({ print: b.print }),
    idle: (b) => benchIdle({ sessions: b.idleSessions ?? 200, print: b.print }),
    flood: (b) => benchFlood({ print: b.print }),
    postgres: async (b) => {
      const { benchPostgres } = await import("./bench-postgres.ts");
      await benchPostgres({
        ...(b.postgresUrl === undefined ? {} : { url: b.postgresUrl }),
        seconds: b.postgresSeconds ?? 5,
        print: b.print,
      });
    },
    list: async (b) => {
      const { benchList } = await import("./bench-list.ts");
      await benchList({ print: b.print });
    },
    soak: (b) =>
      benchSoak({
        audioDir: b.audioDir,
        seconds: b.soakSeconds ?? 600,
        lane: b.soakLane ?? "native",
        pace: b.soakPace ?? "fast",
        pattern: b.soakPattern ?? "stream",
        print: b.print,
      }),
  };
  for (const [name, bench] of Object.entries(all)) {
    if (only.length === 0 ? !ON_REQUEST.includes(name) : only.includes(name)) await bench(o);
  }
};
