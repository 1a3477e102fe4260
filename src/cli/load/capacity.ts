/** One probe of the capacity search: a session count and whether it fit. */
export interface CapacityProbe {
  readonly sessions: number;
  readonly fits: boolean;
}

/**
 * The largest session count for which `fits` holds, assuming it holds up to some count and fails beyond (the
 * load bench's `--find-capacity`). `1` is known to fit (the single-session baseline). It doubles from 2 until a
 * count fails or `max` fits (the last step is `max` itself), then bisects between the largest count that fit and
 * the smallest that failed until they are at most `resolution(fitting)` apart (by default a tenth of it, at least
 * 1). Returns the largest count that fit (`max` when it did: a lower bound) and every probe in order.
 */
export const searchCapacity = async (
  fits: (sessions: number) => Promise<boolean>,
  max: number,
  resolution: (fitting: number) => number = (n) => Math.max(1, Math.floor(n / 10)),
): Promise<{ readonly capacity: number; readonly probes: readonly CapacityProbe[] }> => {
  const probes: CapacityProbe[] = [];
  const probe = async (sessions: number): Promise<boolean> => {
    const ok = await fits(sessions);
    probes.push({ sessions, fits: ok });
    return ok;
  };
  let fitting = 1;
  let failing: number | null = null;
  while (failing === null && fitting < max) {
    const next = Math.min(fitting * 2, max);
    if (await probe(next)) fitting = next;
    else failing = next;
  }
  while (failing !== null && failing - fitting > resolution(fitting)) {
    const middle = Math.floor((fitting + failing) / 2);
    if (await probe(middle)) fitting = middle;
    else failing = middle;
  }
  return { capacity: fitting, probes };
};
