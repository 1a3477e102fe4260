import type { SessionConfig, SessionState } from "../domain/index.ts";
import type { DecodedFrame } from "../protocol/index.ts";
import type { CommandPreparation } from "./command-preparation.ts";
import { InputRates } from "./event-rate.ts";
import type { InputCost, Mailbox, Pending } from "./mailbox.ts";
import { type HostDeps, rejected } from "./session-host-parts.ts";

/** A client frame, decoded already or decoded with the configuration it is decided under. */
export type ClientFrame = DecodedFrame | ((config: SessionConfig) => DecodedFrame);

/** What the input admission needs of its session host (src/engine/session-host.ts). */
export interface AdmissionHost {
  /** The state after the last committed batch. */
  state(): SessionState;
  /** The last `server_event_seq` published. */
  headSeq(): number;
  /** Whether a failed append waits to be rebuilt: then nothing is prepared on arrival. */
  faulted(): boolean;
  /** Queues `pending` in the mailbox; resolves as the drain that decides it does. */
  push(pending: Pending): Promise<void>;
  /** The drain in progress (resolved when none). */
  idle(): Promise<void>;
  /** An append prepared on arrival settled: a drain that waits on it goes on. */
  wake(): void;
}

/**
 * A session's client frames on their way into its mailbox (`SessionHost.submit`): the limits checked before anything
 * is buffered, and an audio append's preparation (conversion to the runner's rate and VAD) started on arrival when no
 * frame before it may change the configuration.
 *
 * Refused before it is accepted, with `input_backpressure` recorded in order and nothing of it buffered: a frame
 * beyond the pending bytes or commits (`inputLimits`), and a socket's frame (`cost.sniffed`) beyond its bucket
 * (`eventRate`, `appendRate`): the first such refusal of a second is recorded and told, the others of that second
 * are dropped without a trace (src/engine/event-rate.ts). A frame the socket took for an event is counted before it
 * is decoded; one it took for an append, once it decodes as something else.
 */
export class InputAdmission {
  private readonly rates: InputRates;

  constructor(
    private readonly host: AdmissionHost,
    private readonly deps: Pick<HostDeps<unknown>, "now" | "inputLimits" | "eventRate" | "appendRate">,
    private readonly mailbox: Mailbox,
    private readonly preparation: CommandPreparation,
  ) {
    this.rates = new InputRates(deps);
  }

  /** Admits a client frame costing `cost`; resolves once it is decided (or refused, or dropped). */
  submit(frame: ClientFrame, cost: InputCost): Promise<void> {
    const at = this.deps.now();
    // A socket's frame that does not look like an append is counted against the event rate before it is decoded;
    // one that does (`uncounted`) once it is decoded, unless it is one.
    let uncounted = cost.sniffed === "append";
    if (cost.sniffed === "event" || cost.sniffed === "append") {
      const refused = this.rateLimited(frame, at, cost.sniffed);
      if (refused !== null) return refused;
    }
    const over = this.mailbox.refusal(cost);
    if (over !== null) return this.refuse(frame, at, this.overMessage(over));
    // When every client frame waiting is an append being prepared (none changes the configuration), the state's
    // configuration is the one this frame will be decided under: an append starts its resampling and VAD now.
    let lazy = frame;
    if (!this.mailbox.configuring && !this.host.faulted()) {
      const decoded = typeof frame === "function" ? frame(this.host.state().config) : frame;
      if (decoded.type === "input_audio_buffer.append") return this.prepareOnArrival(decoded, cost, at);
      if (uncounted) {
        uncounted = false;
        const refused = this.rateLimited(decoded, at, "event");
        if (refused !== null) return refused;
      }
      lazy = decoded;
    }
    const taken = this.mailbox.take(cost);
    return this.host.push({
      input: async (state) => {
        taken();
        const decoded = typeof lazy === "function" ? lazy(state.config) : lazy;
        if (uncounted && decoded.type !== "input_audio_buffer.append") {
          const verdict = this.rates.count(at, "event");
          if (verdict.kind === "drop") return null;
          if (verdict.kind === "tell") return rejected(decoded, at, this.rates.message(verdict.dropped, "event"));
        }
        return {
          type: "CommandReceived",
          at,
          data: { command: await this.preparation.commandOf(decoded, state, this.host.headSeq()) },
        };
      },
      barrier: false,
      client: { ready: true, prepared: null },
      configures: true,
    });
  }

  /** An append whose configuration is known: its command is prepared now, and decided in arrival order. */
  private prepareOnArrival(decoded: DecodedFrame, cost: InputCost, at: number): Promise<void> {
    const taken = this.mailbox.take(cost);
    const command = this.preparation.commandOf(decoded, this.host.state(), this.host.headSeq());
    const client = { ready: false, prepared: command };
    const settled = (): void => {
      client.ready = true;
      this.host.wake();
    };
    command.then(settled, settled);
    return this.host.push({
      input: async () => {
        taken();
        return { type: "CommandReceived", at, data: { command: await command } };
      },
      barrier: false,
      client,
    });
  }

  private overMessage(over: "bytes" | "turns"): string {
    const limits = this.deps.inputLimits;
    return over === "bytes"
      ? `more than ${limits?.maxPendingBytes} bytes of input are waiting to be processed; slow down`
      : `more than ${limits?.maxPendingTurns} commits are waiting to be processed; slow down`;
  }

  /**
   * The event rate's verdict on a client frame at `at` (ms): null when it passes; else the frame is refused (told:
   * recorded as `input_backpressure`) or dropped (nothing recorded), and the promise resolves as `submit`'s does.
   */
  private rateLimited(frame: ClientFrame, at: number, kind: "event" | "append"): Promise<void> | null {
    const verdict = this.rates.count(at, kind);
    if (verdict.kind === "pass") return null;
    if (verdict.kind === "drop") return this.host.idle();
    return this.refuse(frame, at, this.rates.message(verdict.dropped, kind));
  }

  /** Records a client frame refused with `input_backpressure` before it is accepted: nothing of it is buffered. */
  private refuse(frame: ClientFrame, at: number, message: string): Promise<void> {
    const decoded = typeof frame === "function" ? frame(this.host.state().config) : frame;
    return this.host.push({
      input: async () => rejected(decoded, at, message),
      barrier: false,
      client: { ready: true, prepared: null },
    });
  }
}
