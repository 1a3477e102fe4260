/**
 * Decision rules of earlier releases, which a session recorded by one of them keeps (docs/log-format.md, "Logs of
 * earlier releases"). Today's decider never sets them: the upcaster (src/engine/earlier-releases.ts) fills them in
 * `SessionOpened` and `SessionCreated` of a log that shows it was decided under them, `evolve` keeps them in the
 * state, and the decider reads each one only where today's rule differs. Each is named by the commit that changed
 * the rule; absent (every session opened today): today's rule.
 */
export interface EarlierRules {
  /** Before 42f53f0: audio that overlaps a response decides nothing (no `OverlapDecided`, no `overlap.decision`). */
  readonly noOverlapDecisions?: boolean;
  /**
   * Before 83a7701: `speech_started` is sent at once, also during a response (never held back), the endpointer's
   * floor moves only at a server-VAD stop, and a commit that does not say whether it wants a response gets one.
   */
  readonly speechNeverHeldBack?: boolean;
  /** Before ea7ac2c: a socket that attaches or drops decides nothing (no resume, no `SessionDetached`). */
  readonly attachmentsDecideNothing?: boolean;
  /** Before 83a7701: a session assumes the runner's input rate until the client declares one (since: 24 kHz). */
  readonly inputRateOfRunner?: boolean;
  /**
   * Before 25f1415: every overlap decision is reported (`overlap.decision`), not only a change of it, and a
   * truncation naming any `content_index` is taken (since: only 0, else `bad_event`).
   */
  readonly everyOverlapReported?: boolean;
  /** Before 4cb232b: a server-VAD commit holds everything buffered, also the silence before the speech. */
  readonly serverVadCommitsWholeBuffer?: boolean;
  /** Before 5a45cdf: a commit that asks for a response while one is active gets none (it is not deferred). */
  readonly commitDuringResponseUnanswered?: boolean;
  /**
   * Before 6e96108: the assistant message item opens with the response (`ResponseStarted` without `messageLater`,
   * no `MessageStarted`), at output_index 0, also in a response that only calls tools.
   */
  readonly messageOpensWithResponse?: boolean;
  /**
   * Before c073d28: the endpointer's speech events reach the client also without turn detection (`speech_started` /
   * `speech_stopped` in the model-native lane), a server-VAD commit is not preceded by a held-back `speech_started`,
   * and model output with no active response starts one in the turn lane too.
   */
  readonly speechEventsWithoutTurnDetection?: boolean;
  /**
   * Before 387785c: overlapping speech barges in once it is longer than the short remark (`overlap_barge_in_ms`
   * starts at `overlap_short_ack_ms`, 700, instead of the reference's 1200).
   */
  readonly bargeInAfterShortAck?: boolean;
  /** Before 1e19abe: a restart gives the new runner no unanswered utterance again (no `UtteranceResubmitted`). */
  readonly noUtteranceResubmitted?: boolean;
  /**
   * Before issue 33, part 2: a restart or takeover gives the new runner nothing of an utterance still in progress (no
   * `UtteranceResubmitted{inProgress}`), so it hears only the part after the move.
   */
  readonly noUtteranceCarriedOver?: boolean;
  /** Before issue 33, part 3: `ModelListened` names no response, so `response.listen` carries no `response_id`. */
  readonly listenNamesNoResponse?: boolean;
  /**
   * Before issue 35, part 4: a `response.create` with nothing to respond to (`nothingToRespondTo`: no item, no
   * audio, no text, no instructions) starts a response (the echo spoke half a second of silence), where today it is
   * refused with `response_create_without_input`.
   */
  readonly responseWithoutInputAnswered?: boolean;
  /**
   * Before issue 35, part 1: a client's barge-in signal (`barge_in`, `turn.signal{event: "barge_in"}`) is taken without
   * a word of its own (no `TurnSignalled`, no `turn.event`).
   */
  readonly noTurnEvents?: boolean;
  /** Before issue 35, part 1: `SessionResumed` carries no session (no `config`, no `view`; no `session.resumed.session`). */
  readonly resumedWithoutSession?: boolean;
  /**
   * Before issue 35, part 1: no session tool ledger (tool-ledger.ts). A `function_call_output` of any call id enters
   * history however often, a `function_call` item or a model's call may repeat a call id, and a model's call with an
   * empty id or name is delivered.
   */
  readonly noToolLedger?: boolean;
}
