import { audioOf } from "../../replay/index.ts";
import { appendRefusalsOf, describeRefusals, guessSentRate, isAppend, refusalEvidence } from "./appends.ts";
import { broken, type Evidence, type Grader, grade, type Step } from "./grade.ts";

/**
 * The `core.audio-rate` grader and its reference tone: the app streams a 1000 Hz tone at the input rate it declared;
 * the pitch the server heard tells whether the audio really is at that rate (a tone heard an octave low was sent at
 * half the rate it claimed).
 */

/** The reference tone of `core.audio-rate`, Hz, and how far its measured pitch may stray (a ratio). */
export const TONE_HZ = 1000;
const TONE_TOLERANCE = 0.03;

/**
 * The pitch of the loudest stretch of the session's input (Hz at the session's input rate), by zero crossings over
 * the 20 ms windows whose RMS is within a tenth of the loudest's; null when no stretch is louder than silence.
 */
export const tonePitchOf = (samples: Int16Array, rateHz: number): number | null => {
  const window = Math.round(rateHz / 50);
  const rms: number[] = [];
  for (let i = 0; i + window <= samples.length; i += window) {
    let sum = 0;
    for (let k = i; k < i + window; k += 1) sum += ((samples[k] ?? 0) / 32768) ** 2;
    rms.push(Math.sqrt(sum / window));
  }
  const loudest = Math.max(0, ...rms);
  if (loudest < 0.02) return null;
  let crossings = 0;
  let windows = 0;
  const perWindow: number[] = [];
  for (const [w, value] of rms.entries()) {
    if (value < loudest * 0.9) continue;
    windows += 1;
    let here = 0;
    for (let k = Math.max(1, w * window); k < (w + 1) * window; k += 1)
      if ((samples[k - 1] ?? 0) < 0 !== (samples[k] ?? 0) < 0) here += 1;
    crossings += here;
    perWindow.push(here);
  }
  // A tone is steady: its windows cross zero as often as each other (speech does not). At least 200 ms of it.
  const mean = perWindow.reduce((a, b) => a + b, 0) / Math.max(1, perWindow.length);
  const spread = Math.sqrt(perWindow.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, perWindow.length));
  if (windows < 10 || spread > 0.1 * mean) return null;
  return crossings / 2 / ((windows * window) / rateHz);
};

/**
 * The input rate the client declared (Hz) when it sent its first append: the last `SessionCreated` or
 * `SessionConfigured` before it (`config.inputAudio.rate`; G.711 is always 8000 Hz), or null when the log has none.
 */
const declaredRateOf = (steps: readonly Step[], before: number): number | null => {
  let rate: number | null = null;
  for (const s of steps) {
    if (s.revision >= before) break;
    for (const e of s.events)
      if (e.type === "SessionCreated" || e.type === "SessionConfigured") {
        const config = e.data.config as { inputAudio?: { rate?: number } } | undefined;
        rate = config?.inputAudio?.rate ?? rate;
      }
  }
  return rate;
};

/** Grades the audio rate: the reference tone heard at its pitch. */
export const audioRate: Grader = (input, steps, t0) => {
  const update = steps.find((s) => s.command?.type === "session.update");
  const sent = steps.filter((s) => isAppend(s.command));
  if (sent.length === 0) return broken("the app sent no audio: the case asks it to stream the reference tone");
  const first = sent[0] as Step;
  const evidence: Evidence[] = [{ revision: first.revision, at_ms: first.at - t0, what: "first append" }];
  if (update !== undefined)
    evidence.unshift({ revision: update.revision, at_ms: update.at - t0, what: "session.update" });
  const refusals = appendRefusalsOf(sent);
  if (refusals.length > 0)
    return grade(
      "fail",
      `${describeRefusals(refusals, sent.length)}: the tone was not heard as it was sent`,
      [...evidence, ...refusalEvidence(refusals, t0)],
      ["audio rate"],
      "the server refused its audio appends",
    );
  const { input: heard } = audioOf(input.entries);
  const samples = new Int16Array(
    heard.pcm16.buffer.slice(heard.pcm16.byteOffset, heard.pcm16.byteOffset + (heard.pcm16.byteLength & ~1)),
  );
  const pitch = tonePitchOf(samples, heard.rateHz);
  if (pitch === null)
    return grade(
      "harness-broken",
      "no steady tone in the audio: the case asks the app to stream the reference tone",
      evidence,
    );
  const ratio = pitch / TONE_HZ;
  const declaredHz = declaredRateOf(steps, first.revision) ?? heard.rateHz;
  const heardAs = `the ${TONE_HZ} Hz tone was heard at ${Math.round(pitch)} Hz (declared input rate ${declaredHz} Hz)`;
  if (Math.abs(ratio - 1) <= TONE_TOLERANCE)
    return grade(
      "pass",
      heardAs,
      evidence,
      ["audio rate"],
      "the tone was heard at its pitch: audio at the declared rate",
    );
  const guess = guessSentRate(declaredHz, TONE_HZ, pitch);
  const likely =
    guess.likelyHz === null
      ? `sent at about ${Math.round(guess.estimateHz)} Hz, no common rate`
      : `most likely sent at ${guess.likelyHz} Hz (estimate ${Math.round(guess.estimateHz)} Hz)`;
  return grade(
    "fail",
    `${heardAs}: the audio is not at the declared rate (it plays ${ratio.toFixed(2)} times too ${ratio > 1 ? "high" : "low"}; ${likely})`,
    evidence,
    ["audio rate"],
    "the tone’s pitch was off: the audio is not at the declared rate",
  );
};

/** The reference tone of `core.audio-rate` at `rateHz`: 1 s of `TONE_HZ` (half scale), then 1 s of silence. */
export const referenceTone = (rateHz: number): Int16Array => {
  const tone = new Int16Array(rateHz * 2);
  for (let i = 0; i < rateHz; i += 1) tone[i] = Math.round(16384 * Math.sin((2 * Math.PI * TONE_HZ * i) / rateHz));
  return tone;
};
