import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import { parse } from "yaml";
import { z } from "zod";

/**
 * A client case (issue 23): one rule a Realtime client must keep, as a data file of conformance/client-cases/. The
 * reference peer plays the case on one connection (`actions`: what it does to that connection when a server event
 * goes out), and `grader` grades the client from the session's log (graders.ts).
 */
export interface ClientCase {
  /** Stable id, `profile.name`: the file's name without `.yaml`. */
  readonly id: string;
  /** The rule it checks, and where it is written. */
  readonly rule: string;
  /** core (every client), barge-in, resume, playback, lease (the duplex extensions). */
  readonly profile: "core" | "barge-in" | "resume" | "playback" | "lease";
  /** `all`: required of every Realtime client; `duplex`: only of clients of the duplex extensions. */
  readonly required: "all" | "duplex";
  /** What the client's app is asked to do during the case. */
  readonly asks: string;
  readonly actions: readonly CaseAction[];
  readonly grader: GraderName;
}

export const GRADERS = [
  "handshake",
  "audio-rate",
  "forward-compat",
  "error-recovery",
  "barge-in",
  "playback",
  "resume",
  "no-retry",
  "lease",
] as const;
export type GraderName = (typeof GRADERS)[number];

/**
 * What the peer does when the `nth` (1-based, default 1) server event of type `on` is about to go to the client:
 * `inject` sends `event` first; `extra_field` adds `field`'s keys to that event; `drop` ends the connection with no
 * close frame (the client sees 1006); `twin` sends, before the event, the same event under its other dialect's name
 * (the beta name to a GA client, the GA name to a beta one); `close` sends a close frame with `code` and `reason`;
 * `replace` sends
 * `session.replaced` and closes with 1000, as the server does to a socket another connection's resume superseded.
 * `refuse_resume` answers the client's `session.resume` (a client event) with `answer`: `session_resume_expired` (an
 * error, as for a session that expired) or `session.resync_required` (replay impossible: start a new session). After
 * `replace` or `refuse_resume`, every later `session.resume` of the session is answered `session_resume_expired` by
 * the peer: none reaches the server.
 */
export type CaseAction =
  | { readonly on: string; readonly nth: number; readonly do: "inject"; readonly event: Record<string, unknown> }
  | { readonly on: string; readonly nth: number; readonly do: "extra_field"; readonly field: Record<string, unknown> }
  | { readonly on: string; readonly nth: number; readonly do: "drop" }
  | { readonly on: string; readonly nth: number; readonly do: "twin" }
  | { readonly on: string; readonly nth: number; readonly do: "replace" }
  | {
      readonly on: "session.resume";
      readonly nth: number;
      readonly do: "refuse_resume";
      readonly answer: "session_resume_expired" | "resync_required";
    }
  | { readonly on: string; readonly nth: number; readonly do: "close"; readonly code: number; readonly reason: string };

const action = z.discriminatedUnion("do", [
  z
    .object({
      on: z.string(),
      nth: z.number().int().positive().default(1),
      do: z.literal("inject"),
      event: z.record(z.string(), z.unknown()),
    })
    .strict(),
  z
    .object({
      on: z.string(),
      nth: z.number().int().positive().default(1),
      do: z.literal("extra_field"),
      field: z.record(z.string(), z.unknown()),
    })
    .strict(),
  z.object({ on: z.string(), nth: z.number().int().positive().default(1), do: z.literal("drop") }).strict(),
  z.object({ on: z.string(), nth: z.number().int().positive().default(1), do: z.literal("replace") }).strict(),
  z.object({ on: z.string(), nth: z.number().int().positive().default(1), do: z.literal("twin") }).strict(),
  z
    .object({
      on: z.literal("session.resume"),
      nth: z.number().int().positive().default(1),
      do: z.literal("refuse_resume"),
      answer: z.enum(["session_resume_expired", "resync_required"]).default("session_resume_expired"),
    })
    .strict(),
  z
    .object({
      on: z.string(),
      nth: z.number().int().positive().default(1),
      do: z.literal("close"),
      code: z.number().int().min(1000).max(4999),
      reason: z.string().max(120).default(""),
    })
    .strict(),
]);

const caseSchema = z
  .object({
    id: z.string().regex(/^[a-z-]+\.[a-z0-9-]+$/, "profile.name, lower case"),
    rule: z.string().min(1),
    profile: z.enum(["core", "barge-in", "resume", "playback", "lease"]),
    required: z.enum(["all", "duplex"]),
    asks: z.string().min(1),
    actions: z.array(action).default([]),
    grader: z.enum(GRADERS),
  })
  .strict();

/**
 * The cases of `dir`, in file-name order. @throws Error naming the file and the path of the key when a file is not a
 * valid case, or when its id is not its file name.
 */
export const loadClientCases = async (dir: string): Promise<ClientCase[]> => {
  const files = (await readdir(dir)).filter((f) => f.endsWith(".yaml")).sort();
  const cases: ClientCase[] = [];
  for (const file of files) {
    const parsed = caseSchema.safeParse(parse(await readFile(join(dir, file), "utf8")));
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new Error(`${join(dir, file)}: ${issue?.path.join(".") || "(top)"}: ${issue?.message}`);
    }
    if (`${parsed.data.id}.yaml` !== file)
      throw new Error(`${join(dir, file)}: id ${parsed.data.id} is not the file's name`);
    cases.push(parsed.data as ClientCase);
  }
  return cases;
};
