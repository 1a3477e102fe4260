/**
 * Playback truth (BEHAVIOUR.md, "Playback truth"; reference/realtime-duplex-api.md, "Playback").
 * The ledger of one response and the rule that turns a played position into the text history keeps.
 */

/** Per-response ledger, all in ms of output audio. */
export interface PlaybackLedger {
  readonly generatedMs: number;
  readonly sentMs: number;
  readonly playedMs: number;
  readonly committedMs: number;
}

export const emptyLedger: PlaybackLedger = { generatedMs: 0, sentMs: 0, playedMs: 0, committedMs: 0 };

/** A cumulative mark recorded with each audio delta: the transcript's length when that much audio had been made. */
export interface AudioTextMark {
  readonly textChars: number;
  readonly audioEndMs: number;
}

/**
 * The transcript prefix the listener heard by `committedMs`: linear interpolation of the character count between
 * the marks around it (proportional to `totalMs` when there are none), right-trimmed. `committedMs` at or past
 * the end gives the whole text; 0 gives "".
 */
export const textPrefixFor = (
  text: string,
  marks: readonly AudioTextMark[],
  totalMs: number,
  committedMs: number,
): string => {
  if (committedMs >= totalMs) return text;
  if (committedMs <= 0) return "";
  const points = [{ textChars: 0, audioEndMs: 0 }, ...marks, { textChars: text.length, audioEndMs: totalMs }];
  let chars = text.length;
  for (let i = 1; i < points.length; i += 1) {
    const prev = points[i - 1] as AudioTextMark;
    const cur = points[i] as AudioTextMark;
    if (cur.audioEndMs >= committedMs) {
      const span = cur.audioEndMs - prev.audioEndMs;
      const fraction = span <= 0 ? 1 : (committedMs - prev.audioEndMs) / span;
      chars = Math.floor(prev.textChars + fraction * (cur.textChars - prev.textChars));
      break;
    }
  }
  return text.slice(0, chars).trimEnd();
};

/**
 * The estimate of `played_ms` for a client that never acknowledges playback (ours): `min(sent_ms, time since the
 * first delta)`, capped by a truncation. Times in ms; `firstDeltaAt` and `at` on the engine clock.
 */
export const estimatePlayedMs = (
  sentMs: number,
  firstDeltaAt: number | null,
  at: number,
  truncatedAtMs: number | null,
): number => {
  const elapsed = firstDeltaAt === null ? 0 : Math.max(0, at - firstDeltaAt);
  const played = Math.min(sentMs, elapsed);
  return truncatedAtMs === null ? played : Math.min(played, truncatedAtMs);
};
