/**
 * History's items (BEHAVIOUR.md, "Playback truth"): an item as the conversation holds it (message, function call,
 * function call output) and a function call a response made. The decider, the state and the runner's stage read
 * them; `conversation.item.*` server events render them.
 */
import type { ItemId } from "./ids.ts";

/**
 * An item as history holds it. For a message, `text` is what the listener heard (assistant) or said (user: its
 * transcript or typed text); function calls and their outputs carry their call fields.
 */
export interface HistoryItem {
  readonly id: ItemId;
  readonly type: "message" | "function_call" | "function_call_output";
  readonly role: "user" | "assistant" | "system";
  readonly text: string;
  /** Audio length of the item, ms (0 for text and function items). */
  readonly audioMs: number;
  readonly status: "in_progress" | "completed" | "incomplete";
  /** Whether the item's content is audio (`input_audio` / `output_audio`) rather than text. */
  readonly audio: boolean;
  readonly callId?: string;
  readonly name?: string;
  readonly arguments?: string;
  readonly output?: string;
}

/** A function call a response made. */
export interface FunctionCallItem {
  readonly itemId: ItemId;
  readonly callId: string;
  readonly name: string;
  readonly arguments: string;
}
