import type { VadModel } from "../../src/engine/ports/vad.ts";

/**
 * The real Silero VAD (as `startServer` loads it) behind a gate, to hold the mailbox at a chosen point: while the
 * gate is shut every stream's `process` waits (in call order) before it reaches the model, as a VAD thread busy with
 * a long batch would; `failNext(n)` makes the next `n` calls reject, as a VAD thread that died would.
 */
export const gatedVad = () => {
  let open: Promise<void> = Promise.resolve();
  let release = (): void => undefined;
  let failing = 0;
  let calls = 0;
  return {
    /** `process` calls made so far, across streams. */
    get calls(): number {
      return calls;
    },
    shut(): void {
      open = new Promise((resolve) => {
        release = resolve;
      });
    },
    open(): void {
      release();
    },
    failNext(n: number): void {
      failing = n;
    },
    wrap: (vad: VadModel): VadModel => ({
      sampleRate: vad.sampleRate,
      frameSamples: vad.frameSamples,
      close: () => vad.close(),
      createStream() {
        const stream = vad.createStream();
        return {
          async process(samples) {
            calls += 1;
            if (failing > 0) {
              failing -= 1;
              throw new Error("injected: the VAD thread exited");
            }
            await open;
            return stream.process(samples);
          },
          reset: () => stream.reset(),
          close: () => stream.close(),
        };
      },
    }),
  };
};
