/**
 * The scripted runner's synthetic voice: deterministic, speech-like PCM16 for a line of text, so a script's `speak`
 * sounds like speech to a VAD and a listener without any model (the same text always gives the same samples).
 */

/** Harmonics of the synthetic voice and their weights (1/k), normalised so the peak stays under `PEAK`. */
const HARMONICS = [1, 2, 3, 4, 5, 6];
const PEAK = 0.5 * 32767;
const HARMONIC_SUM = HARMONICS.reduce((sum, k) => sum + 1 / k, 0);
/** Syllables per second of the amplitude envelope. */
const SYLLABLE_HZ = 4.5;

/**
 * Deterministic speech-like PCM16 for `text`: a voiced tone (a fundamental of 95..175 Hz chosen per character,
 * gliding, with six harmonics) under a syllable-rate amplitude envelope; spaces and punctuation are quieter, as
 * pauses. `msPerCharacter` ms per character, so the duration is `text.length * msPerCharacter` ms. Pure: the same
 * text gives the same samples.
 *
 * @param sampleRate output rate (Hz).
 * @returns PCM16 samples at `sampleRate`, `round(text.length * msPerCharacter * sampleRate / 1000)` of them.
 */
export const synthesizeSpeech = (text: string, sampleRate: number, msPerCharacter = 60): Int16Array => {
  const samplesPerChar = (msPerCharacter * sampleRate) / 1000;
  const total = Math.round(text.length * samplesPerChar);
  const out = new Int16Array(total);
  const smoothing = 1 - Math.exp(-1 / (0.008 * sampleRate));
  const fade = Math.max(1, Math.round(0.01 * sampleRate));
  let phase = 0;
  let f0 = 130;
  let gain = 0;
  for (let i = 0; i < total; i++) {
    const index = Math.min(text.length - 1, Math.floor(i / samplesPerChar));
    const char = text[index] ?? " ";
    const code = text.charCodeAt(index);
    const voiced = /\p{L}|\p{N}/u.test(char);
    const targetF0 = 95 + ((code * 37) % 80);
    const targetGain = voiced ? 1 : /\s/.test(char) ? 0.3 : 0.2;
    f0 += (targetF0 - f0) * smoothing;
    gain += (targetGain - gain) * smoothing;
    phase += (2 * Math.PI * f0) / sampleRate;
    if (phase > 2 * Math.PI * 1000) phase -= 2 * Math.PI * 1000;
    const t = i / sampleRate;
    const syllable = Math.sin(Math.PI * SYLLABLE_HZ * t);
    const envelope = 0.3 + 0.7 * syllable * syllable;
    let wave = 0;
    for (const k of HARMONICS) wave += Math.sin(k * phase) / k;
    const edge = Math.min(1, i / fade, (total - 1 - i) / fade);
    out[i] = Math.round((PEAK * gain * envelope * edge * wave) / HARMONIC_SUM);
  }
  return out;
};
