import {
  type DomainEvent,
  type EventOf,
  forcedListen,
  type HistoryItem,
  historyItemOf,
  type Input,
  type ItemId,
  type RefAudioInput,
  type ResponseCreate,
  type RunnerUnit,
  responseProgressOf,
  type SessionConfig,
  type SessionState,
} from "../domain/index.ts";

/**
 * What the engine does after a decision is appended (DESIGN.md, "How data flows": effects derived from events).
 * `configure.refAudio` is the clip a `session.update` set (null: removed), absent when the update left it alone.
 */
export type Effect =
  | { readonly kind: "submit"; readonly unit: RunnerUnit }
  | { readonly kind: "abort"; readonly epoch: number }
  | { readonly kind: "configure"; readonly config: SessionConfig; readonly refAudio?: RefAudioInput | null }
  /**
   * The logged appends of an utterance the model never answered, or of one still in progress, from `fromMs` to
   * `toMs` on the input clock, go to the runner again (its runner lost its work: a restart, a takeover, a failed
   * append). The host has them from the log.
   */
  | { readonly kind: "resubmit"; readonly fromMs: number; readonly toMs: number }
  | { readonly kind: "close" }
  | TimerEffect;

/** The `TimerFired` input a timer enqueues when it fires (src/domain/inputs.ts). */
export type TimerFiring = Extract<Input, { type: "TimerFired" }>["data"];

/**
 * A session timer a decision arms or cancels (BEHAVIOUR.md, "Defaults and limits"), run by the engine's timers
 * (src/engine/timers.ts) and never by the runner: `arm_timer` fires `fire` as a `TimerFired` input after `ms`
 * (re-arming the one of that name), `cancel_timer` stops it. The response timer follows the active response's
 * progress; the idle timer follows the session's `idle_timeout_s` (socket activity re-arms it too, outside the log).
 * The disconnect grace is armed by the socket's attachment (a drop, a failed append, a rebuild), not by a decision.
 */
export type TimerEffect =
  | {
      readonly kind: "arm_timer";
      readonly ms: number;
      readonly fire: Exclude<TimerFiring, { timer: "disconnect_grace" }>;
    }
  | { readonly kind: "cancel_timer"; readonly timer: "response_timeout" | "idle_ttl" };

/** The effects the runner is given (src/engine/runner-binding.ts). */
export type RunnerEffect = Exclude<Effect, TimerEffect>;

/** A decision's effects, in their order, for the runner and for the engine's timers. */
export const splitEffects = (
  effects: readonly Effect[],
): { readonly runner: RunnerEffect[]; readonly timers: TimerEffect[] } => {
  const runner: RunnerEffect[] = [];
  const timers: TimerEffect[] = [];
  for (const e of effects) {
    if (e.kind === "arm_timer" || e.kind === "cancel_timer") timers.push(e);
    else runner.push(e);
  }
  return { runner, timers };
};

/** The `response.create` an input carried, if it was one. */
const responseCreateOf = (input: Input): ResponseCreate | null =>
  input.type === "CommandReceived" && input.data.command.type === "response.create" ? input.data.command : null;

/** `response.input` as history items: references resolved against the conversation, given items under derived ids. */
const responseInputOf = (
  create: ResponseCreate | null,
  history: readonly HistoryItem[],
  responseId: string,
): HistoryItem[] | null =>
  create?.input === undefined || create.input === null
    ? null
    : create.input.flatMap((item, i) => {
        if (item.type !== "item_reference") return [historyItemOf(`${responseId}_input${i}` as ItemId, item)];
        const found = history.find((h) => h.id === item.id);
        return found === undefined ? [] : [found];
      });

/** What an event's effect is derived from: the input, the state before and after it, and the input's speech marks. */
interface EffectContext {
  readonly input: Input;
  readonly before: SessionState;
  readonly after: SessionState;
  readonly started: Extract<DomainEvent, { type: "SpeechStarted" }> | undefined;
  readonly stopped: Extract<DomainEvent, { type: "SpeechStopped" }> | undefined;
}

/** The runner unit of an audio append that was buffered: its audio, where it starts, the VAD's marks, its video. */
const appendEffect = (event: EventOf<"AudioBuffered">, c: EffectContext): Effect | null => {
  if (c.input.type !== "CommandReceived" || c.input.data.command.type !== "input_audio_buffer.append") return null;
  const command = c.input.data.command;
  return {
    kind: "submit",
    unit: {
      kind: "append",
      epoch: c.after.epoch,
      audio: command.audio,
      startMs: c.before.input.clockMs,
      vad: {
        speechStartedAtMs: c.started?.data.audioStartMs ?? null,
        speechStoppedAtMs: c.stopped?.data.audioEndMs ?? null,
        speechActive: event.data.endpointer.phase === "speech",
      },
      ...(command.videoFrames === undefined || command.videoFrames.length === 0
        ? {}
        : { videoFrames: command.videoFrames }),
      ...(forcedListen(c.before, command) ? { forceListen: true as const } : {}),
    },
  };
};

/** A response the server started (not the model's own): the `respond` unit, `response.create`'s options first. */
const respondEffect = (event: EventOf<"ResponseStarted">, c: EffectContext): Effect | null => {
  if (event.data.source === "model") return null;
  const create = responseCreateOf(c.input);
  return {
    kind: "submit",
    unit: {
      kind: "respond",
      epoch: c.after.epoch,
      responseId: event.data.responseId,
      instructions: event.data.instructions,
      modalities: event.data.modalities,
      conversation: event.data.conversation ?? "auto",
      input: responseInputOf(create, c.before.history, event.data.responseId),
      metadata: event.data.metadata,
      tools: create?.tools ?? c.after.config.tools,
      toolChoice: create?.toolChoice ?? c.after.config.toolChoice,
      temperature: create?.temperature ?? c.after.config.temperature,
      maxOutputTokens: create?.maxOutputTokens ?? c.after.config.maxResponseOutputTokens,
      inReplyTo: event.data.inReplyTo ?? null,
    },
  };
};

/** An item the client created: a tool's output, a user's or system's text, or the model's own earlier words. */
const itemEffect = (event: EventOf<"ItemCreated">, c: EffectContext): Effect | null => {
  const { item } = event.data;
  const epoch = c.after.epoch;
  if (item.type === "function_call_output")
    return {
      kind: "submit",
      unit: {
        kind: "function_call_output",
        epoch,
        itemId: item.id,
        callId: item.callId ?? "",
        output: item.output ?? "",
      },
    };
  if (item.text !== "" && item.role !== "assistant")
    return { kind: "submit", unit: { kind: "text", epoch, text: item.text } };
  // The model's own earlier words, as the client says them (issue 33, part 4): it keeps them, answers none. A call
  // the client places is one of them too: a model server's tool ledger takes an output only for a call it was given.
  if ((item.type === "message" && item.role === "assistant") || item.type === "function_call")
    return { kind: "submit", unit: { kind: "item", epoch, item } };
  return null;
};

/** A truncated item of a response: what was played of it, as a playback unit that truncates. */
const truncateEffect = (event: EventOf<"ItemTruncated">, c: EffectContext): Effect | null => {
  const responseId = c.after.audio[event.data.itemId]?.responseId;
  if (responseId === undefined) return null;
  const ms = event.data.audioEndMs;
  return {
    kind: "submit",
    unit: { kind: "playback", epoch: c.after.epoch, responseId, playedMs: ms, committedMs: ms, truncate: true },
  };
};

/** A configuration the session took, with the voice clip its `session.update` set or removed. */
const configureEffect = (event: EventOf<"SessionConfigured">, c: EffectContext): Effect => {
  const patch =
    c.input.type === "CommandReceived" && c.input.data.command.type === "session.update"
      ? c.input.data.command.patch
      : null;
  return patch?.refAudio === undefined
    ? { kind: "configure", config: event.data.config }
    : { kind: "configure", config: event.data.config, refAudio: patch.refAudio };
};

/** The idle timer at the session's `idle_timeout_s` (s; null: none, the timer is cancelled). */
const idleTimerEffect = (state: SessionState): TimerEffect => {
  const s = state.config.idleTimeoutS;
  return s === null
    ? { kind: "cancel_timer", timer: "idle_ttl" }
    : { kind: "arm_timer", ms: s * 1000, fire: { timer: "idle_ttl" } };
};

/**
 * The response timer after an input: re-armed at the session's `response_timeout_ms` when the active response made
 * progress (or began) or the timeout changed, cancelled when no response is active any more; null when neither
 * changed. A session rebuilt from its log (restart, takeover) has no timer armed yet, so its first input arms one for
 * a response still active.
 */
const responseTimerEffect = (input: Input, before: SessionState, after: SessionState): TimerEffect | null => {
  const rebuilt = input.type === "SessionRecovered" || input.type === "SessionOwned";
  const armed = rebuilt ? null : responseProgressOf(before);
  const progress = responseProgressOf(after);
  // A session.update that changes response_timeout_ms during a response re-arms its timer at the new value.
  const retimed = progress !== null && after.config.responseTimeoutMs !== before.config.responseTimeoutMs;
  if (progress === armed && !retimed) return null;
  if (progress === null) return { kind: "cancel_timer", timer: "response_timeout" };
  return { kind: "arm_timer", ms: after.config.responseTimeoutMs, fire: { timer: "response_timeout", progress } };
};

/**
 * The maximum-lifetime timer (`max_session_lifetime_s`): armed when the session is created, and again when it is
 * rebuilt from its log (a restart, a takeover: that host has none armed), for what is left of it until
 * `lifetimeEndsAt` (at once when that passed while no node served it); null otherwise, and for a session without one.
 */
const lifetimeTimerEffect = (input: Input, events: readonly DomainEvent[], after: SessionState): TimerEffect | null => {
  const endsAt = after.lifetimeEndsAt;
  if (endsAt === undefined || after.phase !== "open") return null;
  const rebuilt = input.type === "SessionRecovered" || input.type === "SessionOwned";
  if (!rebuilt && !events.some((e) => e.type === "SessionCreated")) return null;
  return { kind: "arm_timer", ms: Math.max(0, endsAt - input.at), fire: { timer: "max_lifetime" } };
};

/**
 * The effect of each kind of domain event that has one (null: not this time). An event kind not named here has no
 * effect: the runner is not told of it.
 */
const EFFECTS: { readonly [K in DomainEvent["type"]]?: (event: EventOf<K>, c: EffectContext) => Effect | null } = {
  AudioBuffered: appendEffect,
  InputCommitted: (e, c) => ({ kind: "submit", unit: { kind: "commit", epoch: c.after.epoch, itemId: e.data.itemId } }),
  ResponseStarted: respondEffect,
  EpochAdvanced: (e) => ({ kind: "abort", epoch: e.data.epoch }),
  InputTextAppended: (e, c) => ({ kind: "submit", unit: { kind: "text", epoch: c.after.epoch, text: e.data.text } }),
  ItemCreated: itemEffect,
  PlaybackAcknowledged: (e, c) => ({
    kind: "submit",
    unit: {
      kind: "playback",
      epoch: c.after.epoch,
      responseId: e.data.responseId,
      playedMs: e.data.playedMs,
      committedMs: e.data.committedMs,
      truncate: e.data.truncate,
    },
  }),
  ItemTruncated: truncateEffect,
  InputCleared: (_e, c) => ({ kind: "submit", unit: { kind: "clear", epoch: c.after.epoch } }),
  SessionConfigured: configureEffect,
  UtteranceResubmitted: (e) => ({ kind: "resubmit", fromMs: e.data.audioStartMs, toMs: e.data.audioEndMs }),
  SessionClosed: () => ({ kind: "close" }),
};

/**
 * Derives the effects of one input's decision: the runner's, in the order of its events (`EFFECTS`), then the
 * timers' (`TimerEffect`: the idle timer of a new configuration, the response timer of the response's progress).
 * Pure: `before` is the state the input was decided on, `after` the state its events led to.
 */
export const effectsOf = (
  input: Input,
  events: readonly DomainEvent[],
  before: SessionState,
  after: SessionState,
): Effect[] => {
  const context: EffectContext = {
    input,
    before,
    after,
    started: events.find((e): e is EventOf<"SpeechStarted"> => e.type === "SpeechStarted"),
    stopped: events.find((e): e is EventOf<"SpeechStopped"> => e.type === "SpeechStopped"),
  };
  const effects: Effect[] = [];
  for (const event of events) {
    // The entry for the event's own type (the mapped type above pairs them; TypeScript cannot follow the pairing).
    const effectOf = EFFECTS[event.type] as ((event: DomainEvent, c: EffectContext) => Effect | null) | undefined;
    const effect = effectOf?.(event, context) ?? null;
    if (effect !== null) effects.push(effect);
  }
  // A new session's or a new configuration's idle timer, after the configure effect that carries the same config.
  if (events.some((e) => e.type === "SessionCreated" || e.type === "SessionConfigured"))
    effects.push(idleTimerEffect(after));
  const responseTimer = responseTimerEffect(input, before, after);
  if (responseTimer !== null) effects.push(responseTimer);
  const lifetimeTimer = lifetimeTimerEffect(input, events, after);
  if (lifetimeTimer !== null) effects.push(lifetimeTimer);
  return effects;
};
