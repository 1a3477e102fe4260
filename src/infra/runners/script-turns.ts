/**
 * Which turn of a script a trigger plays (see script.ts): the first turn with a `match` that the unit fits, else the
 * next turn on that trigger's cursor, and past the last one what `when_exhausted` says. One picker per session: the
 * cursors are the session's own.
 */
import type { RunnerUnit } from "../../domain/index.ts";
import type { Script, ScriptMatch, ScriptTrigger, ScriptTurn } from "./script.ts";

/** What the next `respond` answers: the last text, and whether a tool's output came back, since the last one. */
export interface Answered {
  readonly text: string | null;
  readonly toolOutput: boolean;
}

/**
 * Whether `unit` fits a turn's `match` (see script.ts): the exact set of requested modalities of a `respond`
 * unit, or a case-insensitive substring of a `text` unit, or of `answered.text`, the text a `respond` unit answers
 * (the last text since the previous response); `toolOutput`, a `respond` unit asked after a function call's output
 * came back (`answered.toolOutput`). A unit of another kind fits nothing.
 */
export const fits = (match: ScriptMatch | undefined, unit: RunnerUnit | null, answered: Answered): boolean => {
  if (match === undefined || unit === null) return false;
  if (match.toolOutput === true && (unit.kind !== "respond" || !answered.toolOutput)) return false;
  if (match.modalities !== undefined) {
    if (unit.kind !== "respond") return false;
    const wanted = new Set(match.modalities);
    const asked = new Set(unit.modalities);
    if (wanted.size !== asked.size || [...wanted].some((m) => !asked.has(m))) return false;
  }
  if (match.text !== undefined) {
    const text =
      unit.kind === "text" ? unit.text : unit.kind === "respond" || unit.kind === "commit" ? answered.text : null;
    if (text === null || !text.toLowerCase().includes(match.text.toLowerCase())) return false;
  }
  return true;
};

/** Picks a session's turn for a trigger and its unit (null: none plays); a cursor turn moves that trigger's cursor. */
export type TurnPicker = (trigger: ScriptTrigger, unit: RunnerUnit | null, answered: Answered) => ScriptTurn | null;

/** The turns of `script` by trigger, read once; each call of the result is one session's picker. */
export const createTurnPickers = (script: Script): (() => TurnPicker) => {
  /** Turns on each trigger's cursor (those without `match`), and the turns with `match`, in file order. */
  const turnsByTrigger = new Map<ScriptTrigger, ScriptTurn[]>();
  const matchedTurns: ScriptTurn[] = [];
  for (const turn of script.turns) {
    if (turn.match !== undefined) matchedTurns.push(turn);
    else turnsByTrigger.set(turn.on, [...(turnsByTrigger.get(turn.on) ?? []), turn]);
  }
  return () => {
    /** How many times each trigger fired, to pick its next turn. */
    const fired = new Map<ScriptTrigger, number>();
    return (trigger, unit, answered) => {
      const matched = matchedTurns.find((turn) => turn.on === trigger && fits(turn.match, unit, answered));
      if (matched !== undefined) return matched;
      const turns = turnsByTrigger.get(trigger) ?? [];
      const count = fired.get(trigger) ?? 0;
      fired.set(trigger, count + 1);
      if (turns.length === 0) return null;
      if (count < turns.length) return turns[count] ?? null;
      switch (script.whenExhausted) {
        case "ignore":
          return null;
        case "repeat_last":
          return turns[turns.length - 1] ?? null;
        case "cycle":
          return turns[count % turns.length] ?? null;
        default: {
          const unhandled: never = script.whenExhausted;
          throw new Error(`scripted runner: unhandled when_exhausted ${String(unhandled)}`);
        }
      }
    };
  };
};
