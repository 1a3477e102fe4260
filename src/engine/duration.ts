/**
 * A duration such as `7d`, `12h`, `30m`, `45s`, `250ms` or `0`, in ms; null when not one. A number other than 0
 * needs its unit: `7` could mean days as easily as seconds, and `gc --older-than 7` read as seconds removed every
 * finished session.
 */
export const parseDurationMs = (value: string): number | null => {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)?$/.exec(value.trim());
  if (m === null) return null;
  if (m[2] === undefined) return Number(m[1]) === 0 ? 0 : null;
  const unit = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 }[m[2]] ?? 1000;
  return Number(m[1]) * unit;
};
