/**
 * Partial JSON patterns and `${name}` templates of conformance scenarios (conformance/README.md, "Patterns").
 *
 * A pattern matches a JSON value when:
 * - it is a scalar (string, number, boolean, null) equal to the value;
 * - it is an array of the same length whose elements match element by element;
 * - it is an object whose every key matches the value's key (other keys of the value are ignored), where a key
 *   the value lacks matches only `{$exists: false}`; operator keys among them apply to the object itself
 *   (`{type: error, $any_of: [{code: x}, {error: {code: x}}]}`);
 * - it is an operator object (every key starts with `$`), whose operators all hold:
 *   `$exists: bool`, `$not: pattern`, `$any_of: [patterns]`, `$eq: value` (deep equality),
 *   `$regex: "re"`, `$type: string | number | boolean | object | array | null`,
 *   `$gt / $gte / $lt / $lte: number`, `$length: pattern` (of a string or an array),
 *   `$contains: pattern` (an element of an array matches).
 * The key `$capture` inside an object pattern is not matched: it names variables to save from the matched event.
 */

/** A JSON value as parsed from YAML or from a server frame. */
export type Json = null | boolean | number | string | readonly Json[] | { readonly [key: string]: Json };

/** Thrown when a pattern or a template is written wrongly (an unknown operator, an unknown variable). */
export class PatternError extends Error {
  readonly code = "pattern_invalid";
  constructor(message: string) {
    super(message);
    this.name = "PatternError";
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value);

const OPERATORS = new Set([
  "$exists",
  "$not",
  "$any_of",
  "$eq",
  "$regex",
  "$type",
  "$gt",
  "$gte",
  "$lt",
  "$lte",
  "$length",
  "$contains",
]);

/** Whether `pattern` is an operator object: a non-empty object whose keys all start with `$`. */
const isOperator = (pattern: unknown): pattern is Record<string, unknown> =>
  isObject(pattern) &&
  Object.keys(pattern).length > 0 &&
  Object.keys(pattern).every((key) => key.startsWith("$") && key !== "$capture");

const typeOf = (value: unknown): string =>
  value === null ? "null" : Array.isArray(value) ? "array" : value === undefined ? "missing" : typeof value;

/** A short rendering of a value for messages (long strings such as base64 audio are elided). */
export const show = (value: unknown): string => JSON.stringify(elide(value)) ?? "undefined";

/** The value with strings longer than 80 characters replaced by `<N chars>` (for reports). */
export const elide = (value: unknown): unknown => {
  if (typeof value === "string") return value.length > 80 ? `<${value.length} chars>` : value;
  if (Array.isArray(value)) return value.map(elide);
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, elide(v)]));
  return value;
};

const deepEqual = (a: unknown, b: unknown): boolean => {
  if (a === b) return true;
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((x, i) => deepEqual(x, b[i]));
  if (isObject(a) && isObject(b)) {
    const keys = Object.keys(a);
    return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && deepEqual(a[k], b[k]));
  }
  return false;
};

const at = (path: string): string => (path === "" ? "(event)" : path);

const numberOperator = (op: string, bound: unknown, value: unknown, path: string): string | null => {
  if (typeof bound !== "number") throw new PatternError(`${at(path)}: ${op} needs a number, got ${show(bound)}`);
  if (typeof value !== "number") return `${at(path)}: expected a number ${op} ${bound}, got ${show(value)}`;
  const ok =
    op === "$gt" ? value > bound : op === "$gte" ? value >= bound : op === "$lt" ? value < bound : value <= bound;
  return ok ? null : `${at(path)}: expected ${op.slice(1)} ${bound}, got ${value}`;
};

const operatorMismatch = (pattern: Record<string, unknown>, value: unknown, path: string): string | null => {
  for (const [op, arg] of Object.entries(pattern)) {
    let why: string | null;
    switch (op) {
      case "$exists":
        why = (value !== undefined) === Boolean(arg) ? null : `${at(path)}: expected ${arg ? "present" : "absent"}`;
        break;
      case "$not":
        why = mismatch(arg, value, path) === null ? `${at(path)}: expected not ${show(arg)}, got ${show(value)}` : null;
        break;
      case "$any_of": {
        if (!Array.isArray(arg)) throw new PatternError(`${at(path)}: $any_of needs a list of patterns`);
        const reasons = arg.map((p) => mismatch(p, value, path));
        why = reasons.includes(null) ? null : `${at(path)}: matches none of $any_of (${reasons.join(" | ")})`;
        break;
      }
      case "$eq":
        why = deepEqual(arg, value) ? null : `${at(path)}: expected exactly ${show(arg)}, got ${show(value)}`;
        break;
      case "$regex":
        if (typeof arg !== "string") throw new PatternError(`${at(path)}: $regex needs a string`);
        why =
          typeof value === "string" && new RegExp(arg).test(value)
            ? null
            : `${at(path)}: expected a string matching /${arg}/, got ${show(value)}`;
        break;
      case "$type":
        why = typeOf(value) === arg ? null : `${at(path)}: expected a ${String(arg)}, got ${typeOf(value)}`;
        break;
      case "$gt":
      case "$gte":
      case "$lt":
      case "$lte":
        why = numberOperator(op, arg, value, path);
        break;
      case "$length":
        why =
          typeof value === "string" || Array.isArray(value)
            ? mismatch(arg, value.length, `${path}.length`)
            : `${at(path)}: expected a string or a list, got ${typeOf(value)}`;
        break;
      case "$contains":
        why = !Array.isArray(value)
          ? `${at(path)}: expected a list, got ${typeOf(value)}`
          : value.some((element) => mismatch(arg, element, path) === null)
            ? null
            : `${at(path)}: no element matches ${show(arg)}`;
        break;
      default:
        throw new PatternError(`${at(path)}: unknown operator ${op} (known: ${[...OPERATORS].join(", ")})`);
    }
    if (why !== null) return why;
  }
  return null;
};

/**
 * Why `value` does not match `pattern` (the first difference, with its path, e.g.
 * `response.status: expected "cancelled", got "completed"`), or null when it matches.
 * @throws PatternError for an unknown operator or an operator given the wrong argument.
 */
export function mismatch(pattern: unknown, value: unknown, path = ""): string | null {
  if (isOperator(pattern)) return operatorMismatch(pattern, value, path);
  if (value === undefined) return `${at(path)}: missing (expected ${show(pattern)})`;
  if (Array.isArray(pattern)) {
    if (!Array.isArray(value)) return `${at(path)}: expected a list, got ${show(value)}`;
    if (value.length !== pattern.length)
      return `${at(path)}: expected ${pattern.length} elements, got ${value.length} (${show(value)})`;
    for (const [i, element] of pattern.entries()) {
      const why = mismatch(element, value[i], `${path}.${i}`);
      if (why !== null) return why;
    }
    return null;
  }
  if (isObject(pattern)) {
    if (!isObject(value)) return `${at(path)}: expected an object, got ${show(value)}`;
    const operators: Record<string, unknown> = {};
    for (const [key, sub] of Object.entries(pattern)) {
      if (key === "$capture") continue;
      if (key.startsWith("$")) {
        operators[key] = sub;
        continue;
      }
      const why = mismatch(sub, value[key], path === "" ? key : `${path}.${key}`);
      if (why !== null) return why;
    }
    return Object.keys(operators).length === 0 ? null : operatorMismatch(operators, value, path);
  }
  return deepEqual(pattern, value) ? null : `${at(path)}: expected ${show(pattern)}, got ${show(value)}`;
}

/**
 * The paths (`[..., key]`) of keys of `pattern` that start with `$` but are no operator (a misspelt `$exist`), so
 * that a scenario file is refused when it is read rather than when the step runs.
 */
export const unknownOperators = (pattern: unknown, path: readonly (string | number)[] = []): (string | number)[][] => {
  if (Array.isArray(pattern)) return pattern.flatMap((p, i) => unknownOperators(p, [...path, i]));
  if (!isObject(pattern)) return [];
  return Object.entries(pattern).flatMap(([key, sub]) => {
    if (key === "$capture") return [];
    if (key.startsWith("$") && !OPERATORS.has(key)) return [[...path, key]];
    return unknownOperators(sub, [...path, key]);
  });
};

/** Whether `value` matches `pattern` (see {@link mismatch}). */
export const matches = (pattern: unknown, value: unknown): boolean => mismatch(pattern, value) === null;

/** The `$capture` of an object pattern: variable name -> path in the matched event. */
export const capturesOf = (pattern: unknown): Readonly<Record<string, string>> => {
  if (!isObject(pattern) || !isObject(pattern.$capture)) return {};
  return Object.fromEntries(Object.entries(pattern.$capture).map(([name, path]) => [name, String(path)]));
};

/** The value at a dotted path (`session.id`, `item.content.0.transcript`), or undefined. */
export const valueAt = (value: unknown, path: string): unknown =>
  path === ""
    ? value
    : path.split(".").reduce<unknown>((current, key) => {
        if (Array.isArray(current)) return current[Number(key)];
        return isObject(current) ? current[key] : undefined;
      }, value);

const PLACEHOLDER = /\$\{([A-Za-z_][A-Za-z0-9_.]*)\}/g;
const WHOLE = /^\$\{([A-Za-z_][A-Za-z0-9_.]*)\}$/;

/**
 * Fills `${name}` placeholders in every string of `value` from `lookup`. A string that is exactly one placeholder
 * takes the variable's value as it is (a number stays a number); inside a longer string it is interpolated.
 * `$capture` maps are left alone (they name variables, they do not use them).
 * @throws PatternError naming a variable `lookup` does not know.
 */
export const fill = (value: unknown, lookup: (name: string) => unknown): unknown => {
  const get = (name: string): unknown => {
    const v = lookup(name);
    if (v === undefined) {
      throw new PatternError(
        `unknown variable \${${name}} (set it with vars, set or capture; what an expect captures can be used from the next step on)`,
      );
    }
    return v;
  };
  if (typeof value === "string") {
    const whole = WHOLE.exec(value);
    if (whole !== null) return get(whole[1] as string);
    return value.replace(PLACEHOLDER, (_, name: string) => {
      const v = get(name);
      return typeof v === "string" ? v : JSON.stringify(v);
    });
  }
  if (Array.isArray(value)) return value.map((v) => fill(v, lookup));
  if (isObject(value))
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, k === "$capture" ? v : fill(v, lookup)]));
  return value;
};
