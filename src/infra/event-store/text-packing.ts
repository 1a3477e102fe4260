import { deflateRawSync, inflateRawSync } from "node:zlib";

/**
 * Lossless packing of an entry's text on disk (issue 24: the log at most 100 MB per session-hour). A session's log
 * is mostly small entries (an audio append's command and its `AudioBuffered`, a delivered delta, an overlap
 * decision: about 28 an audio-second), and their JSON (`data`, 150 bytes on average) and metadata (`at`, epoch,
 * turn, wire digests, the hash chain: 150 more) weighed as much as the packed audio of a conversation. Each entry's
 * two texts are joined by a line feed (JSON text never holds a raw one) and compressed with raw DEFLATE (RFC 1951,
 * node:zlib) primed with a preset dictionary: the keys and shapes of the entries a session writes most, so that
 * even a 100-byte entry finds its keys in the window. A soak's entries keep about 45% of their text bytes; what is
 * left is mostly digests, timestamps and VAD probabilities.
 *
 * Cost: about 15 us per entry to pack (on the writer thread) and 8 to unpack (on the reader): `duplex bench --only
 * store` (pack_text_us_per_entry) and docs/benchmarks.md, "The log's size".
 *
 * Codecs (the SQLite store keeps an id for each beside the text, sqlite-writer.ts `textCodecs`): `null` (plain:
 * `data` and `metadata` as JSON text) and `JSON_DEFLATE_D1` (`data` holds the packed bytes of both, `metadata` is
 * empty; a 4 KiB window). The dictionary and window of a codec never change: a new one is a new codec name, and the
 * old one stays readable.
 */
export const JSON_DEFLATE_D1 = "json-deflate-d1";

export type TextCodec = typeof JSON_DEFLATE_D1 | null;

/**
 * The preset dictionary of `JSON_DEFLATE_D1` (within the 4 KiB window): entries as a soak session writes them, the
 * rarest first, since DEFLATE codes nearer matches in fewer bits and a match reaches back at most the window's
 * length (about 1.4 KB into an entry, the dictionary's first entries are out of reach; the frequent ones at its end
 * stay in it). Frozen: files depend on every byte.
 */
const DICTIONARY_D1 = Buffer.from(
  [
    '{"item":{"id":"item_resp_00000000_0","type":"message","audio":true,"role":"assistant","text":"","audioMs":0,"status":"incomplete"},"committedMs":0}',
    '{"responseId":"resp_00000000_0","itemId":"item_resp_00000000_0","previousItemId":"item_resp_00000000_0","status":"completed","reason":null,"transcript":"","spoke":true,"audioSent":true,"metadata":null,"playback":{"generatedMs":0,"sentMs":0,"playedMs":0,"committedMs":0},"error":null,"text":null,"functionCalls":[],"messageOutputIndex":0,"modalities":["audio","text"]}',
    '{"seq":0,"type":"response.output_audio.done","sha256":""},{"seq":0,"type":"response.output_audio_transcript.done","sha256":""},{"seq":0,"type":"response.content_part.done","sha256":""},{"seq":0,"type":"response.output_item.done","sha256":""},{"seq":0,"type":"conversation.item.done","sha256":""},{"seq":0,"type":"response.done","sha256":""},{"seq":0,"type":"rate_limits.updated","sha256":""}',
    '{"itemId":"item_00000000_u0","audioStartMs":0,"announced":false}',
    '{"itemId":"item_00000000_u0","audioEndMs":0,"announced":false}',
    '{"output":{"kind":"end_of_turn","epoch":0}}',
    '{"command":{"type":"session.heartbeat","eventId":"evt_client_0"}}',
    '{"seq":0,"type":"session.heartbeat_ack","sha256":""}',
    '{"action":"listen","reason":"long_overlap_speech","policy":"listen_only","overlapMs":0,"reported":false}',
    '{"action":"drop","reason":"overlap_not_speech","policy":"listen_only","overlapMs":0,"reported":true}',
    '{"action":"listen","reason":"short_ack","policy":"listen_only","overlapMs":0,"reported":false}',
    '{"output":{"kind":"audio","epoch":0,"audio":{"$bin":[0,0]},"transcript":""}}',
    '{"responseId":"resp_00000000_0","itemId":"item_resp_00000000_0","audio":"input","sampleRateHz":24000,"transcript":"","durationMs":0,"mark":{"textChars":0,"audioEndMs":0},"playback":{"generatedMs":0,"sentMs":0,"playedMs":0,"committedMs":0},"firstDeltaAt":0}',
    '"wire":[{"seq":0,"type":"response.output_audio.delta","sha256":""},{"seq":0,"type":"response.output_audio_transcript.delta","sha256":""}],',
    '{"command":{"type":"input_audio_buffer.append","eventId":"evt_client_0","audio":{"$bin":[0,3200]},"isSpeech":null,"vad":[0.0,0.0,0.0],"rms":0.0}}',
    '{"durationMs":100,"bytes":3200,"clockMs":0,"vadFrames":0,"endpointer":{"phase":"speech","runStartMs":null,"silenceStartMs":null,"floorMs":0}}',
    '{"durationMs":100,"bytes":3200,"clockMs":0,"vadFrames":0,"endpointer":{"phase":"silence","runStartMs":0,"silenceStartMs":null,"floorMs":0}}',
    '\n{"at":1700000000000,"epoch":0,"turnId":0,"wire":[],"chain":"',
  ].join(""),
);

/**
 * DEFLATE's window: 4 KiB (2^12) holds the whole dictionary (2445 bytes) and the start of any entry; with the
 * default 32 KiB window and hash tables each call spent three times as long setting them up (41 against 15 us).
 * The output's chunk is 1 KiB (most entries pack to about 100 bytes): with the default 16 KiB, each packed text kept
 * 16 KiB alive until its group committed.
 */
const ZLIB_OPTIONS = { dictionary: DICTIONARY_D1, windowBits: 12, memLevel: 4, chunkSize: 1024 } as const;

/** Texts shorter than this (bytes, both together) are stored plain: a few bytes of keys gain nothing. */
const MIN_PACKED_BYTES = 48;

const SEPARATOR = 0x0a;

/**
 * Packs an entry's `data` JSON text and its `metadata` JSON text together.
 * @returns the packed bytes and `JSON_DEFLATE_D1`, or null when packing would not save bytes (short texts): store
 *   them plain.
 */
export const packText = (
  json: string,
  metadata: string,
): { readonly bytes: Uint8Array; readonly codec: TextCodec } | null => {
  const plain = Buffer.from(`${json}\n${metadata}`);
  if (plain.byteLength < MIN_PACKED_BYTES) return null;
  const bytes = deflateRawSync(plain, ZLIB_OPTIONS);
  return bytes.byteLength < plain.byteLength ? { bytes, codec: JSON_DEFLATE_D1 } : null;
};

/**
 * The `data` and `metadata` texts of a stored row: as stored when `codec` is null, else unpacked from `data`.
 * @throws RangeError for an unknown codec, or a row whose packed text does not hold the two texts.
 * @throws Error from node:zlib when the packed bytes are corrupt.
 */
export const unpackText = (
  data: string | Uint8Array,
  metadata: string,
  codec: string | null,
): { readonly json: string; readonly metadata: string } => {
  if (codec === null) return { json: typeof data === "string" ? data : Buffer.from(data).toString(), metadata };
  if (codec !== JSON_DEFLATE_D1) throw new RangeError(`entry text: unknown codec ${JSON.stringify(codec)}`);
  if (typeof data === "string") throw new RangeError(`entry text: ${codec} text stored as a string, not bytes`);
  const plain = inflateRawSync(data, {
    dictionary: DICTIONARY_D1,
    windowBits: ZLIB_OPTIONS.windowBits,
    chunkSize: ZLIB_OPTIONS.chunkSize,
  });
  const split = plain.indexOf(SEPARATOR);
  if (split < 0) throw new RangeError(`entry text: ${codec} text without its metadata`);
  return { json: plain.toString("utf8", 0, split), metadata: plain.toString("utf8", split + 1) };
};
