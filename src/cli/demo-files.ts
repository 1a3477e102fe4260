import { access, constants, mkdir, readdir, readFile, rm, stat } from "node:fs/promises";
import { join } from "node:path";
import { InvalidArgumentError } from "commander";
import { type EncodedWav, pcm16FromBytes, pcm16ToBytes, readEncodedWav, resamplePcm16 } from "../infra/audio/index.ts";

/**
 * The files of `duplex demo` (issue 9, "The demo"): its input WAV, read undecoded and checked before anything
 * connects, and its `--out` folder.
 */

/** PCM16 rates a session takes as they are (Hz); others are resampled to 16 kHz. */
const SUPPORTED_RATES = [8000, 16000, 24000, 48000];

/**
 * Reads `path` as the demo's input: a WAV of PCM16 (8-96 kHz, stereo mixed down), IEEE float32, A-law or mu-law (8 kHz), the
 * encodings a session accepts.
 * @throws InvalidArgumentError naming the path and what is wrong with it, with the sox command that converts it.
 */
export const readInput = async (path: string): Promise<EncodedWav> => {
  const info = await stat(path).catch(() => null);
  if (info === null) throw new InvalidArgumentError(`--input ${path}: no such file`);
  if (info.isDirectory()) throw new InvalidArgumentError(`--input ${path}: is a folder; give a WAV file`);
  const convert = `sox ${JSON.stringify(path)} -r 16000 -c 1 -b 16 -e signed-integer input_16k.wav`;
  let wav: EncodedWav;
  try {
    wav = readEncodedWav(await readFile(path));
  } catch (error) {
    const why = (error as Error).message;
    if (why.startsWith("truncated")) throw new InvalidArgumentError(`--input ${path}: the WAV is ${why}`);
    // Debian's sox reads MP3 only with an extra package.
    const mp3 = why.includes("an MP3 file") ? " (sox reads MP3 with Debian's libsox-fmt-mp3 package)" : "";
    throw new InvalidArgumentError(
      `--input ${path}: not a WAV file the demo can send (${why}); convert it with: ${convert}${mp3}`,
    );
  }
  if (wav.channels !== 1)
    throw new InvalidArgumentError(
      `--input ${path}: the demo needs mono audio; the file has ${wav.channels} channels; convert it with: ${convert}`,
    );
  if (wav.encoding.startsWith("g711") && wav.sampleRate !== 8000)
    throw new InvalidArgumentError(
      `--input ${path}: G.711 audio is sent at 8000 Hz; the file is at ${wav.sampleRate} Hz; convert it with: ${convert}`,
    );
  if (wav.missingBytes > 0)
    throw new InvalidArgumentError(
      `--input ${path}: the WAV is truncated: its data chunk declares ${wav.missingBytes} bytes more than the file holds`,
    );
  return wav;
};

/**
 * What the demo sends of a WAV: its bytes in its own encoding, except PCM16 at a rate the session does not take
 * (not 8, 16, 24 or 48 kHz), resampled to 16 kHz. `silence`: the byte that fills the tail (mu-law 0xFF, A-law 0xD5).
 */
export const toSend = (wav: EncodedWav) => {
  const bytesPerSample = { pcm16: 2, pcm_f32le: 4, g711_ulaw: 1, g711_alaw: 1 }[wav.encoding];
  const silence = wav.encoding === "g711_ulaw" ? 0xff : wav.encoding === "g711_alaw" ? 0xd5 : 0;
  if (wav.encoding !== "pcm16" || SUPPORTED_RATES.includes(wav.sampleRate)) {
    const whole = wav.data.subarray(0, wav.data.length - (wav.data.length % bytesPerSample));
    return { encoding: wav.encoding, rate: wav.sampleRate, bytes: whole, bytesPerSample, silence };
  }
  const samples = resamplePcm16(pcm16FromBytes(wav.data.subarray(0, wav.data.length & ~1)), wav.sampleRate, 16000);
  return { encoding: wav.encoding, rate: 16000, bytes: pcm16ToBytes(samples), bytesPerSample, silence };
};

/**
 * Makes sure `out` is a folder the demo can write, and removes the response-N.wav files an earlier run left there.
 * @throws one line that names the folder when it is a file or cannot be written.
 */
export const prepareOut = async (out: string): Promise<void> => {
  const info = await stat(out).catch(() => null);
  if (info !== null && !info.isDirectory()) throw new InvalidArgumentError(`--out ${out}: is a file; give a folder`);
  await mkdir(out, { recursive: true }).catch((error: Error) => {
    throw new InvalidArgumentError(`--out ${out}: cannot create the folder (${error.message})`);
  });
  await access(out, constants.W_OK).catch(() => {
    throw new InvalidArgumentError(`--out ${out}: the folder is not writable`);
  });
  for (const file of await readdir(out)) {
    if (/^response-\d+\.wav$/.test(file)) await rm(join(out, file));
  }
};
