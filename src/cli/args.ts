import { InvalidArgumentError } from "commander";

/** A positive number argument. @throws InvalidArgumentError (a usage error, exit 2) otherwise. */
export const positive = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0) throw new InvalidArgumentError("expected a positive number");
  return n;
};

/** A positive whole number argument. @throws InvalidArgumentError (a usage error, exit 2) otherwise. */
export const positiveInteger = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0) throw new InvalidArgumentError("expected a positive whole number");
  return n;
};

/**
 * What the CLI says and returns for an error a command threw (main.ts; tests that run a command in process): one
 * line, and exit 2 for a usage or configuration error (InvalidArgumentError, ConfigError, ScriptError: by name, their
 * modules are loaded only by the commands that need them), 1 for any other.
 */
export const failureOf = (error: unknown): { readonly exitCode: 1 | 2; readonly message: string } => {
  const name = (error as Error).name;
  const usage = error instanceof InvalidArgumentError || name === "ConfigError" || name === "ScriptError";
  const code = (error as NodeJS.ErrnoException).code;
  const message =
    code === "EADDRINUSE"
      ? `${(error as Error).message}: another process listens there; choose another with --port`
      : (error as Error).message;
  return { exitCode: usage ? 2 : 1, message };
};
