import { Command, CommanderError } from "commander";
import { vi } from "vitest";

/**
 * Parses a command line the way `duplex` (src/cli/main.ts) parses it, without running it: every command's options,
 * arguments and value checks (a port, a positive count, a bench name) apply, and no action runs. Resolves with null
 * when the line parses (`--help` and `--version` included), else with commander's message (`error: unknown option
 * '--x'`).
 */
export type ParseDuplexLine = (args: readonly string[]) => Promise<string | null>;

/**
 * The `duplex` program of src/cli/main.ts, captured as main.ts builds it: its `parseAsync(process.argv)` is stubbed
 * for the import, so nothing runs, then every command's action is replaced by a no-op, its exits by throws and its
 * output by nothing. main.ts builds its program once per module graph, so every call shares one capture.
 */
export const captureDuplexProgram = (): Promise<ParseDuplexLine> => {
  captured ??= capture();
  return captured;
};

let captured: Promise<ParseDuplexLine> | undefined;

const capture = async (): Promise<ParseDuplexLine> => {
  let program: Command | null = null;
  const spy = vi.spyOn(Command.prototype, "parseAsync").mockImplementation(async function (this: Command) {
    program = this;
    return this;
  });
  try {
    await import("../../src/cli/main.ts");
  } finally {
    spy.mockRestore();
  }
  const root = program as Command | null;
  if (root === null) throw new Error("src/cli/main.ts did not parse a command line: no program to capture");
  const quiet = (command: Command): void => {
    command.exitOverride().configureOutput({ writeOut: () => {}, writeErr: () => {}, outputError: () => {} });
    // Only a command that has an action gets the no-op: one without (the root) must still refuse an unknown command.
    if ((command as unknown as { _actionHandler: unknown })._actionHandler !== null) command.action(() => {});
    for (const sub of command.commands) quiet(sub);
  };
  quiet(root);
  return async (args) => {
    try {
      await root.parseAsync([...args], { from: "user" });
      return null;
    } catch (error) {
      if (!(error instanceof CommanderError)) throw error;
      return ["commander.helpDisplayed", "commander.help", "commander.version"].includes(error.code)
        ? null
        : error.message;
    }
  };
};
