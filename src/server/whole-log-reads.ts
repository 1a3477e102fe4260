import type { FastifyReply, FastifyRequest } from "fastify";
import { handshakeErrorBody } from "../protocol/index.ts";

/** Requests that read a whole log at once, at most (`SessionsApiOptions.maxWholeLogReads`). */
export const DEFAULT_WHOLE_LOG_READS = 2;

/** Requests that may wait for one of those places; one more is refused. */
export const WHOLE_LOG_QUEUE = 32;

/**
 * Wraps the handlers that read and fold a whole session's log (its report, export, timeline, page, audio): at most
 * `max` of them run at once, the next {@link WHOLE_LOG_QUEUE} wait for a place in arrival order (a timeline page
 * fetches its audio files at once), and one beyond is answered at once with 429 `resource_exhausted` and
 * `Retry-After: 1`. So parallel requests for long sessions hold at most `max` logs in memory (each about its log's
 * size: an hour-long session's is about 100 MB), however many are sent.
 */
export const foldsWholeLogs = (max: number) => wholeLogReads(max).route;

/**
 * The places of {@link foldsWholeLogs}, shared by everything a request does that reads and folds a whole log: the
 * session routes (`route`), and a chat request resolving the earlier answers its `audio.id`s name (`run`), so that
 * one limit bounds them all (issue 33's attack: 16 parallel lookups of a 58,000-entry session held the loop 19 s).
 * `run` resolves to `{value}`, or to null when `max` run and {@link WHOLE_LOG_QUEUE} wait (nothing is run: the
 * caller answers 429 `resource_exhausted` with `Retry-After: 1`).
 */
export interface WholeLogReads {
  readonly max: number;
  run<T>(work: () => Promise<T>): Promise<{ readonly value: T } | null>;
  route<R extends FastifyRequest>(
    handler: (request: R, reply: FastifyReply) => Promise<unknown>,
  ): (request: R, reply: FastifyReply) => Promise<unknown>;
}

/** The message of a refusal of {@link WholeLogReads}. */
export const wholeLogsBusy = (max: number): string =>
  `${max} requests that read a whole session log are running and ${WHOLE_LOG_QUEUE} wait; retry in a second`;

export const wholeLogReads = (max: number = DEFAULT_WHOLE_LOG_READS): WholeLogReads => {
  let running = 0;
  const waiting: (() => void)[] = [];
  const release = (): void => {
    const nextInLine = waiting.shift();
    if (nextInLine === undefined) running -= 1;
    else nextInLine();
  };
  const run = async <T>(work: () => Promise<T>): Promise<{ readonly value: T } | null> => {
    if (running >= max) {
      if (waiting.length >= WHOLE_LOG_QUEUE) return null;
      await new Promise<void>((resolve) => waiting.push(resolve));
    } else running += 1;
    try {
      return { value: await work() };
    } finally {
      release();
    }
  };
  return {
    max,
    run,
    route:
      <R extends FastifyRequest>(handler: (request: R, reply: FastifyReply) => Promise<unknown>) =>
      async (request: R, reply: FastifyReply): Promise<unknown> => {
        const done = await run(() => handler(request, reply));
        if (done !== null) return done.value;
        return reply
          .code(429)
          .header("retry-after", "1")
          .send(handshakeErrorBody("resource_exhausted", wholeLogsBusy(max)));
      },
  };
};
