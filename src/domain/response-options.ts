import type { ResponseCreate } from "./commands.ts";
import { MAX_TEMPERATURE } from "./config.ts";
import { type Rejection, reject } from "./errors.ts";
import type { SessionState } from "./state.ts";

/**
 * Why the per-response options of `response.create` are refused, or null (OpenAI Realtime, "response.create";
 * reference, "Capability negotiation by model"): every `item_reference` of `response.input` must name an item of the
 * conversation (`item_not_found`), tools need a model that calls them (`tool_calls_unsupported`), a `tool_choice`
 * naming a function needs that function among the response's tools (else the session's), and the temperature is
 * within 0..2 (`bad_event`); a response with nothing to respond to is `response_create_without_input`. `param` is the
 * dotted path of the field at fault.
 */
export const responseCreateRefusal = (state: SessionState, command: ResponseCreate): Rejection | null => {
  for (const [i, item] of (command.input ?? []).entries()) {
    if (item.type === "item_reference" && !state.history.some((h) => h.id === item.id)) {
      return reject(
        "item_not_found",
        `response.input[${i}] names item ${item.id}, which is not in the conversation`,
        `response.input.${i}.id`,
      );
    }
  }
  if (command.tools !== undefined && command.tools !== null && command.tools.length > 0) {
    if (!state.capabilities.supportsToolCalls) {
      return reject(
        "tool_calls_unsupported",
        "this model does not call tools (capabilities.supports_tool_calls is false)",
        "response.tools",
      );
    }
    const names = command.tools.map((t) => t.name);
    const twin = names.find((name, i) => names.indexOf(name) !== i);
    if (twin !== undefined) {
      return reject("bad_event", `response.tools declares "${twin}" twice`, "response.tools");
    }
  }
  // What the runner will be given: the response's tools and choice, else the session's.
  const tools = command.tools ?? state.config.tools;
  const choice = command.toolChoice ?? state.config.toolChoice;
  const param =
    command.toolChoice === undefined || command.toolChoice === null ? "response.tools" : "response.tool_choice";
  if (typeof choice === "object" && !tools.some((t) => t.name === choice.name)) {
    return reject(
      "bad_event",
      `tool_choice names function "${choice.name}", which is not among the response's tools (${tools.map((t) => t.name).join(", ") || "none"})`,
      param,
    );
  }
  if (choice === "required" && tools.length === 0) {
    return reject("bad_event", 'tool_choice "required" needs at least one tool', param);
  }
  const t = command.temperature ?? null;
  if (t !== null && !(t >= 0 && t <= MAX_TEMPERATURE)) {
    return reject("bad_event", `temperature must be within 0..${MAX_TEMPERATURE}; got ${t}`, "response.temperature");
  }
  const overridden = overrideRefusal(state, command);
  if (overridden !== null) return overridden;
  if (nothingToRespondTo(state, command) && state.rules?.responseWithoutInputAnswered !== true) {
    return reject(
      "response_create_without_input",
      "response.create has nothing to respond to: no audio was appended, the conversation holds no item, and neither " +
        "the session nor the response gives instructions; append audio, create an item, or pass response.input or " +
        "response.instructions",
    );
  }
  return null;
};

/**
 * True when a `response.create` would answer nothing (reference/realtime-duplex-api.md, "Errors":
 * `response_create_without_input`): the session has heard no audio (its input clock is at 0 ms), holds no text
 * appended with `input.text.append`, its conversation holds no item, the response gives no `input` and no
 * `instructions`, and the session's instructions are empty (whitespace alone is empty: it says nothing). A prompt alone (the session's or the response's
 * instructions) is something to respond to: a greeting, as OpenAI's models give one.
 */
export const nothingToRespondTo = (state: SessionState, command: ResponseCreate): boolean =>
  state.input.clockMs === 0 &&
  state.input.text.trim() === "" &&
  state.history.length === 0 &&
  (command.input ?? []).length === 0 &&
  (command.instructions ?? "").trim() === "" &&
  state.config.instructions.trim() === "";

/**
 * Why a response's own voice or output format is refused, or null: a response speaks in the session's voice and
 * format (the runner and the engine's output conversion are the session's), so one that names another is refused
 * (`response_override_unsupported` for the voice, `unsupported_audio_format` for the format) rather than ignored;
 * naming the session's own is taken.
 */
const overrideRefusal = (state: SessionState, command: ResponseCreate): Rejection | null => {
  if (command.voice !== undefined && command.voice !== state.config.voice) {
    return reject(
      "response_override_unsupported",
      `response.voice ${JSON.stringify(command.voice)} is not the session's voice (${JSON.stringify(state.config.voice)}): a response speaks in the session's voice; change it with session.update`,
      "response.voice",
    );
  }
  const format = command.outputAudio;
  const session = state.config.outputAudio;
  if (format !== undefined && (format.format !== session.format || format.rate !== session.rate)) {
    return reject(
      "unsupported_audio_format",
      `response.output_audio_format ${format.format} at ${format.rate} Hz is not the session's (${session.format} at ${session.rate} Hz): a response is sent in the session's output format; change it with session.update`,
      "response.output_audio_format",
    );
  }
  return null;
};
