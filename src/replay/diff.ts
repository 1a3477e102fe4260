import { isInputType } from "../engine/log.ts";

/**
 * A structural diff of two JSON values (issue 20, part 6: a divergence you can read): the paths at which they
 * differ, each with the recorded and the replayed value. Paths are written `data.items[2].text`; a value present on
 * one side only is `undefined` on the other. Stops after `limit` differences.
 */
export interface JsonDifference {
  readonly path: string;
  readonly recorded: unknown;
  readonly replayed: unknown;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

export const jsonDiff = (recorded: unknown, replayed: unknown, limit = 20): JsonDifference[] => {
  const out: JsonDifference[] = [];
  const walk = (a: unknown, b: unknown, path: string): void => {
    if (out.length >= limit) return;
    if (Array.isArray(a) && Array.isArray(b)) {
      for (let i = 0; i < Math.max(a.length, b.length); i += 1) walk(a[i], b[i], `${path}[${i}]`);
      return;
    }
    if (isObject(a) && isObject(b)) {
      const keys = [...new Set([...Object.keys(a), ...Object.keys(b)])];
      for (const key of keys) walk(a[key], b[key], path === "" ? key : `${path}.${key}`);
      return;
    }
    if (JSON.stringify(a) !== JSON.stringify(b))
      out.push({ path: path === "" ? "(the value)" : path, recorded: a, replayed: b });
  };
  walk(recorded, replayed, "");
  return out;
};

/** What `duplex replay --diff` prints of a divergence: the input that produced it, the inputs before, the diff. */
export interface DivergenceExplanation {
  readonly input: {
    readonly revision: number;
    readonly type: string;
    readonly at: string;
    readonly command: string | null;
  };
  /** Up to three inputs before it, oldest first. */
  readonly inputs_before: readonly {
    readonly revision: number;
    readonly type: string;
    readonly at: string;
    readonly command: string | null;
  }[];
  /** The paths at which the recorded and the replayed decision (or server event) differ. */
  readonly differences: readonly JsonDifference[];
}

const describeInput = (e: { revision: number; type: string; data: unknown; metadata: { at: number } }) => {
  const data = e.data as { command?: { type?: string }; output?: { kind?: string } };
  return {
    revision: e.revision,
    type: e.type,
    at: new Date(e.metadata.at).toISOString(),
    command: data.command?.type ?? data.output?.kind ?? null,
  };
};

const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/**
 * Explains a replay's first divergence (`replayEntries`) from the recorded entries: the input at its revision, the
 * inputs before it, and a structural diff of the recorded and replayed decision (a wire divergence compares the
 * recorded digest with the replayed event).
 */
export const explainDivergence = (
  entries: readonly { revision: number; type: string; data: unknown; metadata: { at: number } }[],
  divergence: { readonly revision: number; readonly kind: string; readonly expected: string; readonly actual: string },
): DivergenceExplanation => {
  const at = entries.findIndex((e) => e.revision === divergence.revision);
  const input = entries[at];
  const before = entries
    .slice(0, Math.max(0, at))
    .filter((e) => isInputType(e.type))
    .slice(-3);
  return {
    input:
      input === undefined
        ? { revision: divergence.revision, type: "(missing)", at: "", command: null }
        : describeInput(input),
    inputs_before: before.map(describeInput),
    differences:
      divergence.kind === "domain"
        ? jsonDiff(parsed(divergence.expected), parsed(divergence.actual))
        : [{ path: "(server event)", recorded: divergence.expected, replayed: divergence.actual }],
  };
};
