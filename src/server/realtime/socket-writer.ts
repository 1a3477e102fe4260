import type { Duplex } from "node:stream";
import type { WebSocket } from "ws";
import type { ConnectionPort, OutputOverflow } from "../../engine/index.ts";
import { type Dialect, renderForDialect } from "../../protocol/index.ts";

/**
 * The socket writer (issue 34, part 3): a connection's port onto one WebSocket. It renders each session event in the
 * client's dialect, corks the TCP socket for the events of one drain, counts the live output not yet handed to the
 * kernel against the output limits and reports an overflow, and closes with a bounded closing handshake.
 */

/**
 * Output buffer per socket (BEHAVIOUR.md, "Defaults and limits"): live server events written but not yet handed to
 * the kernel, in bytes of JSON text and in events. Beyond either the socket is detached with `output_backpressure`.
 */
export interface OutputLimits {
  readonly maxBytes: number;
  readonly maxEvents: number;
}

/** 2 MiB / 512 events. */
export const DEFAULT_OUTPUT_LIMITS: OutputLimits = { maxBytes: 2 * 1024 * 1024, maxEvents: 512 };

/**
 * How long a socket the server closes may take over its closing handshake before it is cut (ms): ws would wait 30 s,
 * reading (and buffering, up to a whole message) whatever the client still sends.
 */
export const CLOSE_HANDSHAKE_MS = 1000;

/** What a writer is made with. */
export interface SocketWriterOptions {
  readonly dialect: Dialect;
  readonly limits: OutputLimits;
  /**
   * The connection under the WebSocket, as the upgrade handed it to ws (`wss.handleUpgrade`): corked for the events
   * of one drain, through its public `cork`/`uncork`. Absent: each frame is written as ws sends it.
   */
  readonly transport?: Pick<Duplex, "cork" | "uncork">;
  /** The live output passed a limit and was still over it once the burst that passed it was written. */
  readonly overflowed: (output: OutputOverflow) => void;
}

/** A `ConnectionPort` writing to `socket` (see the module's comment). */
export class SocketWriter implements ConnectionPort {
  /** Live output written to the socket and not yet handed to the kernel (ws calls back once it is). */
  #unsentBytes = 0;
  #unsentEvents = 0;
  #checking = false;
  #corked = false;

  constructor(
    readonly socket: WebSocket,
    readonly options: SocketWriterOptions,
  ) {}

  isOpen(): boolean {
    return this.socket.readyState === this.socket.OPEN;
  }

  send(text: string): void {
    this.socket.send(text);
  }

  /**
   * A session event: rendered, written within this tick's cork, and, when live (a resume's replay is read from the
   * log and already in memory), counted until ws hands it to the kernel.
   */
  write(json: string, replayed: boolean): void {
    const text = renderForDialect(json, this.options.dialect);
    this.#batchWrites();
    if (replayed) {
      this.socket.send(text);
      return;
    }
    const size = text.length;
    this.#unsentBytes += size;
    this.#unsentEvents += 1;
    this.socket.send(text, () => {
      this.#unsentBytes -= size;
      this.#unsentEvents -= 1;
    });
    // ws calls back on a later tick even for a write the kernel took at once, so a burst of events published in one
    // drain counts in full until then: the limit is checked once the burst is over.
    if (!this.#checking && this.#over()) {
      this.#checking = true;
      setImmediate(() => {
        this.#checking = false;
        if (this.#over())
          this.options.overflowed({
            unsentBytes: this.#unsentBytes,
            unsentEvents: this.#unsentEvents,
            maxBytes: this.options.limits.maxBytes,
            maxEvents: this.options.limits.maxEvents,
          });
      });
    }
  }

  /**
   * Closes the socket with `code` and `reason`, and cuts it if the client has not answered within
   * `CLOSE_HANDSHAKE_MS`: a reader that does not take the closing frame is not held on to.
   */
  close(code: number | undefined, reason: string): void {
    this.socket.close(code, reason);
    setTimeout(() => this.socket.terminate(), CLOSE_HANDSHAKE_MS).unref();
  }

  #over(): boolean {
    return this.#unsentBytes > this.options.limits.maxBytes || this.#unsentEvents > this.options.limits.maxEvents;
  }

  /**
   * The events of one drain (an answer's audio and transcript deltas, a barge-in's burst) go to the kernel in one
   * write: the TCP socket under ws is corked until the end of this tick (ws writes each frame as it is sent).
   */
  #batchWrites(): void {
    const tcp = this.options.transport;
    if (this.#corked || tcp === undefined) return;
    this.#corked = true;
    tcp.cork();
    process.nextTick(() => {
      this.#corked = false;
      tcp.uncork();
    });
  }
}
