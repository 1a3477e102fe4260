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
