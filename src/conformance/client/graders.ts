import type { Command } from "../../domain/index.ts";
import { audioOf, type RecordedEntry, stepsOf } from "../../engine/index.ts";
import { type AppendRefusal, appendRefusalsOf, describeRefusals, guessSentRate, isAppend } from "./appends.ts";
import type { ClientCase, GraderName } from "./cases.ts";

/**
 * Grading a client from its session's log (issue 23): each grader is a projection over the log's steps (the client's
 * commands as the server received them, and what the server decided and sent), with what the peer did to the
 * connection (`PeerAction`s, timed on the same clock as the log). A grade names the log revisions that decided it.
 */
export type Verdict = "pass" | "non-strict" | "informational" | "unsupported" | "fail" | "harness-broken";

export interface Evidence {
  /** The log revision of the entry, or null for something the peer did. */
  readonly revision: number | null;
  /** ms since the session's first entry. */
  readonly at_ms: number;
  readonly what: string;
}

export interface Grade {
  readonly verdict: Verdict;
  /** Why, with this session's figures and ids. */
  readonly message: string;
  /** Why, in words that do not change from run to run (for tables that compare clients). */
  readonly reason: string;
  readonly evidence: readonly Evidence[];
  /** Rules of the case the client's session exercised (e.g. `truncate`, `playback.ack`, `resume`). */
  readonly exercised: readonly string[];
}

/** What the peer did on the case's connection: the action, the server event that triggered it, when (ms epoch). */
export interface PeerAction {
  readonly do: string;
  readonly on: string;
  readonly at: number;
}

export interface GradeInput {
  readonly entries: readonly RecordedEntry[];
  readonly actions: readonly PeerAction[];
  /** Profiles the client declared it does not do (`--unsupported resume,playback`). */
  readonly unsupported: readonly string[];
}

/** How long after a cut the client's report of what it played may come, ms. */
export const REPORT_WITHIN_MS = 2000;
/** How long after a dropped connection the client's resume may come, ms. */
export const RESUME_WITHIN_MS = 15_000;

interface Step {
  readonly revision: number;
  readonly at: number;
  readonly command: Command | null;
  readonly rejected: string | null;
  readonly events: readonly {
    readonly revision: number;
    readonly type: string;
    readonly data: Record<string, unknown>;
  }[];
  readonly input: string;
}

const stepsFor = (entries: readonly RecordedEntry[]): Step[] =>
  stepsOf(entries).map((s) => {
    const command = s.input.type === "CommandReceived" ? s.input.data.command : null;
    // A step's decisions follow its input in the log: their revisions count on from it.
    const events = s.decisions.map((d, i) => ({
      revision: s.revision + 1 + i,
      type: d.envelope.event.type,
      data: d.envelope.event.data as unknown as Record<string, unknown>,
    }));
    const rejection = events.find((e) => e.type === "RequestRejected");
    return {
      revision: s.revision,
      at: s.input.at,
      command,
      rejected: rejection === undefined ? null : String(rejection.data.code),
      events,
      input: s.input.type,
    };
  });

const grade = (
  verdict: Verdict,
  message: string,
  evidence: Evidence[],
  exercised: string[] = [],
  reason: string = message,
): Grade => ({
  verdict,
  message,
  reason,
  evidence,
  exercised,
});

type Grader = (input: GradeInput, steps: Step[], t0: number) => Grade;

const handshake: Grader = (_input, steps, t0) => {
  const update = steps.find((s) => s.command?.type === "session.update");
  if (update === undefined) return grade("fail", "the client sent no session.update", []);
  const ev = (s: Step, what: string): Evidence => ({ revision: s.revision, at_ms: s.at - t0, what });
  if (update.rejected !== null)
    return grade("fail", `its first session.update was refused: ${update.rejected}`, [
      ev(update, "session.update refused"),
    ]);
  const appends = steps.filter((s) => isAppend(s.command));
  if (appends.length === 0)
    return grade("harness-broken", "the app sent no audio: the case asks it to stream question_16k.wav", [
      ev(update, "session.update"),
    ]);
  const refusals = appendRefusalsOf(appends);
  if (refusals.length > 0)
    return grade(
      "fail",
      describeRefusals(refusals, appends.length),
      [ev(update, "session.update"), ...refusalEvidence(refusals, t0)],
      ["session.update", "audio"],
      "the server refused its audio appends",
    );
  // Pacing: audio time sent against wall time between the first and the last append.
  const audioMs = appends.reduce((n, s) => {
    const buffered = s.events.find((e) => e.type === "AudioBuffered");
    return n + Number(buffered?.data.durationMs ?? 0);
  }, 0);
  const wallMs = (appends.at(-1)?.at ?? 0) - (appends[0]?.at ?? 0);
  const pace = wallMs <= 0 ? Number.POSITIVE_INFINITY : audioMs / wallMs;
  const paced = pace < 1.5 ? "paced near real time" : "sent faster than real time (a file upload)";
  return grade(
    "pass",
    `session.update accepted; ${appends.length} appends of whole samples, ${Math.round(audioMs)} ms of audio in ${Math.round(wallMs)} ms (${paced})`,
    [
      ev(update, "session.update accepted"),
      ev(appends[0] as Step, "first append"),
      ev(appends.at(-1) as Step, "last append"),
    ],
    ["session.update", "audio"],
    "session.update accepted; audio as whole samples",
  );
};

/** The reference tone of `core.audio-rate`, Hz, and how far its measured pitch may stray (a ratio). */
export const TONE_HZ = 1000;
const TONE_TOLERANCE = 0.03;

/**
 * The pitch of the loudest stretch of the session's input (Hz at the session's input rate), by zero crossings over
 * the 20 ms windows whose RMS is within a tenth of the loudest's; null when no stretch is louder than silence.
 */
export const tonePitchOf = (samples: Int16Array, rateHz: number): number | null => {
  const window = Math.round(rateHz / 50);
  const rms: number[] = [];
  for (let i = 0; i + window <= samples.length; i += window) {
    let sum = 0;
    for (let k = i; k < i + window; k += 1) sum += ((samples[k] ?? 0) / 32768) ** 2;
    rms.push(Math.sqrt(sum / window));
  }
  const loudest = Math.max(0, ...rms);
  if (loudest < 0.02) return null;
  let crossings = 0;
  let windows = 0;
  const perWindow: number[] = [];
  for (const [w, value] of rms.entries()) {
    if (value < loudest * 0.9) continue;
    windows += 1;
    let here = 0;
    for (let k = Math.max(1, w * window); k < (w + 1) * window; k += 1)
      if ((samples[k - 1] ?? 0) < 0 !== (samples[k] ?? 0) < 0) here += 1;
    crossings += here;
    perWindow.push(here);
  }
  // A tone is steady: its windows cross zero as often as each other (speech does not). At least 200 ms of it.
  const mean = perWindow.reduce((a, b) => a + b, 0) / Math.max(1, perWindow.length);
  const spread = Math.sqrt(perWindow.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, perWindow.length));
  if (windows < 10 || spread > 0.1 * mean) return null;
  return crossings / 2 / ((windows * window) / rateHz);
};

/**
 * The input rate the client declared (Hz) when it sent its first append: the last `SessionCreated` or
 * `SessionConfigured` before it (`config.inputAudio.rate`; G.711 is always 8000 Hz), or null when the log has none.
 */
const declaredRateOf = (steps: readonly Step[], before: number): number | null => {
  let rate: number | null = null;
  for (const s of steps) {
    if (s.revision >= before) break;
    for (const e of s.events)
      if (e.type === "SessionCreated" || e.type === "SessionConfigured") {
        const config = e.data.config as { inputAudio?: { rate?: number } } | undefined;
        rate = config?.inputAudio?.rate ?? rate;
      }
  }
  return rate;
};

/** The evidence of refused appends: each code's first refusal, with its count and the server's message. */
const refusalEvidence = (refusals: readonly AppendRefusal[], t0: number): Evidence[] =>
  refusals.map((r) => ({
    revision: r.first.revision,
    at_ms: r.first.at - t0,
    what: `append refused: ${r.code} (${r.count} like it): ${r.message}`,
  }));

const audioRate: Grader = (input, steps, t0) => {
  const update = steps.find((s) => s.command?.type === "session.update");
  const sent = steps.filter((s) => isAppend(s.command));
  if (sent.length === 0) return broken("the app sent no audio: the case asks it to stream the reference tone");
  const first = sent[0] as Step;
  const evidence: Evidence[] = [{ revision: first.revision, at_ms: first.at - t0, what: "first append" }];
  if (update !== undefined)
    evidence.unshift({ revision: update.revision, at_ms: update.at - t0, what: "session.update" });
  const refusals = appendRefusalsOf(sent);
  if (refusals.length > 0)
    return grade(
      "fail",
      `${describeRefusals(refusals, sent.length)}: the tone was not heard as it was sent`,
      [...evidence, ...refusalEvidence(refusals, t0)],
      ["audio rate"],
      "the server refused its audio appends",
    );
  const { input: heard } = audioOf(input.entries);
  const samples = new Int16Array(
    heard.pcm16.buffer.slice(heard.pcm16.byteOffset, heard.pcm16.byteOffset + (heard.pcm16.byteLength & ~1)),
  );
  const pitch = tonePitchOf(samples, heard.rateHz);
  if (pitch === null)
    return grade(
      "harness-broken",
      "no steady tone in the audio: the case asks the app to stream the reference tone",
      evidence,
    );
  const ratio = pitch / TONE_HZ;
  const declaredHz = declaredRateOf(steps, first.revision) ?? heard.rateHz;
  const heardAs = `the ${TONE_HZ} Hz tone was heard at ${Math.round(pitch)} Hz (declared input rate ${declaredHz} Hz)`;
  if (Math.abs(ratio - 1) <= TONE_TOLERANCE)
    return grade(
      "pass",
      heardAs,
      evidence,
      ["audio rate"],
      "the tone was heard at its pitch: audio at the declared rate",
    );
  const guess = guessSentRate(declaredHz, TONE_HZ, pitch);
  const likely =
    guess.likelyHz === null
      ? `sent at about ${Math.round(guess.estimateHz)} Hz, no common rate`
      : `most likely sent at ${guess.likelyHz} Hz (estimate ${Math.round(guess.estimateHz)} Hz)`;
  return grade(
    "fail",
    `${heardAs}: the audio is not at the declared rate (it plays ${ratio.toFixed(2)} times too ${ratio > 1 ? "high" : "low"}; ${likely})`,
    evidence,
    ["audio rate"],
    "the tone’s pitch was off: the audio is not at the declared rate",
  );
};

/** The peer's action of `kind`, or a harness-broken grade when it never happened (the trigger never came). */
const actionOf = (input: GradeInput, kinds: readonly string[]): PeerAction | null =>
  input.actions.find((a) => kinds.includes(a.do)) ?? null;

const broken = (message: string): Grade => grade("harness-broken", message, []);

const forwardCompat: Grader = (input, steps, t0) => {
  const injected = actionOf(input, ["inject", "extra_field", "twin"]);
  if (injected === null)
    return broken("no response started, so nothing unknown was sent: the app must ask for an answer");
  const twin = injected.do === "twin";
  const what = twin ? `${injected.on} under the other dialect's name` : "an unknown event type and an unknown field";
  const evidence: Evidence[] = [{ revision: null, at_ms: injected.at - t0, what: `peer: ${what}` }];
  const completed = steps.find(
    (s) => s.at >= injected.at && s.events.some((e) => e.type === "ResponseEnded" && e.data.status === "completed"),
  );
  const later = steps.find((s) => s.at > injected.at && s.command !== null && s.rejected === null);
  if (completed !== undefined)
    evidence.push({ revision: completed.revision, at_ms: completed.at - t0, what: "a response completed after it" });
  if (later !== undefined)
    evidence.push({
      revision: later.revision,
      at_ms: later.at - t0,
      what: `the client went on: ${later.command?.type}`,
    });
  if (completed !== undefined && later !== undefined)
    return grade(
      "pass",
      twin
        ? "the client took the other dialect's spelling in its stride and went on"
        : "the client ignored the unknown event and field and went on",
      evidence,
      [twin ? "beta and GA spellings" : "forward compatibility"],
    );
  return grade("fail", `after ${what} the client sent nothing more (or no answer completed)`, evidence, [
    twin ? "beta and GA spellings" : "forward compatibility",
  ]);
};

const errorRecovery: Grader = (input, steps, t0) => {
  const injected = actionOf(input, ["inject"]);
  if (injected === null) return broken("no response started, so no error was sent: the app must ask for an answer");
  const evidence: Evidence[] = [{ revision: null, at_ms: injected.at - t0, what: "peer: a non-fatal coded error" }];
  const later = steps.find(
    (s) => s.at > injected.at + 50 && s.command !== null && s.command.type !== "session.close" && s.rejected === null,
  );
  if (later === undefined)
    return grade("fail", "after a non-fatal error the client sent no further valid command", evidence, ["errors"]);
  evidence.push({ revision: later.revision, at_ms: later.at - t0, what: `the client went on: ${later.command?.type}` });
  return grade("pass", "the client went on with a valid command after a non-fatal error", evidence, ["errors"]);
};

/** Each response's audio sent so far (ms), from the log's AudioDelivered decisions, by response id. */
const cutsOf = (steps: Step[]) => {
  const sent = new Map<string, number>();
  const items = new Map<string, string>();
  const cuts: {
    response: string;
    item: string;
    at: number;
    revision: number;
    sentMs: number;
    reason: string;
    firstAudioAt: number;
  }[] = [];
  const firstAudioAt = new Map<string, number>();
  const completed = new Set<string>();
  for (const s of steps)
    for (const e of s.events) {
      if (e.type === "AudioDelivered") {
        const id = String(e.data.responseId);
        if (!firstAudioAt.has(id)) firstAudioAt.set(id, s.at);
        sent.set(id, (sent.get(id) ?? 0) + Number(e.data.durationMs));
        items.set(String(e.data.itemId), id);
      }
      if (e.type === "ResponseEnded") {
        const id = String(e.data.responseId);
        if (
          e.data.status === "cancelled" &&
          e.data.audioSent === true &&
          ["barge_in", "turn_detected"].includes(String(e.data.reason))
        )
          cuts.push({
            response: id,
            item: String(e.data.itemId),
            at: s.at,
            revision: e.revision,
            sentMs: sent.get(id) ?? 0,
            reason: String(e.data.reason),
            firstAudioAt: firstAudioAt.get(id) ?? s.at,
          });
        else if (e.data.status === "completed") completed.add(String(e.data.itemId));
      }
    }
  return { cuts, sent, items, completed };
};

/** The position a playback report names: `audio_end_ms` of a truncate, `played_ms` of a playback.ack. */
const reportOf = (
  command: Command | null,
): { item: string | null; response: string | null; ms: number; kind: string } | null => {
  if (command?.type === "conversation.item.truncate")
    return { item: command.itemId, response: null, ms: command.audioEndMs, kind: "truncate" };
  if (command?.type === "playback.ack")
    return { item: command.itemId, response: command.responseId, ms: command.playedMs, kind: "playback.ack" };
  return null;
};

/**
 * Which clock a report seems to read (informational, issue 23): within 50 ms of what it was sent, the received
 * position; otherwise behind it, a played (or wall-clock) position. The two cannot be told apart from the log: a
 * player that never runs dry plays at the wall clock's pace.
 */
const clockOf = (reportedMs: number, sentMs: number, sinceFirstAudioMs: number): string =>
  Math.abs(reportedMs - sentMs) <= 50
    ? "the received position"
    : `a played or wall-clock position (${Math.round(sentMs - reportedMs)} ms behind what it was sent, ${Math.round(sinceFirstAudioMs - reportedMs)} ms behind the wall clock since the first audio)`;

const bargeIn: Grader = (_input, steps, t0) => {
  const { cuts, completed } = cutsOf(steps);
  if (cuts.length === 0)
    return broken("no answer was cut: the app must talk over the answer (stream interrupt_16k.wav while it plays)");
  const evidence: Evidence[] = [];
  const exercised = ["barge-in", "truncate"];
  for (const cut of cuts) {
    evidence.push({
      revision: cut.revision,
      at_ms: cut.at - t0,
      what: `${cut.response} cut (${cut.reason}) with ${Math.round(cut.sentMs)} ms sent`,
    });
    // A client that stops on speech_started (as OpenAI's clients do) reports while the overlap is still being
    // judged: a report from the speech that led to the cut counts.
    const speech = steps.findLast(
      (s) => s.at <= cut.at && s.events.some((e) => e.type === "SpeechStarted" || e.type === "SpeechAnnounced"),
    );
    const from = Math.min(cut.at, speech?.at ?? cut.at);
    const report = steps.find((s) => {
      const r = reportOf(s.command);
      return s.at >= from && r !== null && (r.item === cut.item || r.response === cut.response);
    });
    const r = reportOf(report?.command ?? null);
    if (report === undefined || r === null)
      return grade(
        "fail",
        `the client never reported what it played of ${cut.response} after it was cut`,
        evidence,
        exercised,
        "it never reported what it played of an answer that was cut",
      );
    evidence.push({
      revision: report.revision,
      at_ms: report.at - t0,
      what: `${r.kind} at ${r.ms} ms, ${report.at - cut.at} ms after the cut; its clock reads like ${clockOf(r.ms, cut.sentMs, report.at - cut.firstAudioAt)}`,
    });
    if (r.ms > cut.sentMs + 1)
      return grade(
        "fail",
        `it reported ${r.ms} ms played of ${cut.response}, beyond the ${Math.round(cut.sentMs)} ms it was sent`,
        evidence,
        exercised,
        "it reported more played than it was sent",
      );
    if (report.at - cut.at > REPORT_WITHIN_MS)
      return grade(
        "fail",
        `its report came ${report.at - cut.at} ms after the cut (the bound is ${REPORT_WITHIN_MS} ms)`,
        evidence,
        exercised,
        "its report came too long after the cut",
      );
  }
  const needless = steps.find(
    (s) =>
      s.command?.type === "conversation.item.truncate" &&
      completed.has(s.command.itemId) &&
      !cuts.some((c) => c.item === (s.command as { itemId: string }).itemId),
  );
  if (needless !== undefined) {
    evidence.push({
      revision: needless.revision,
      at_ms: needless.at - t0,
      what: "a truncate of an answer nothing cut",
    });
    return grade("fail", "it truncated an answer that nothing cut", evidence, exercised);
  }
  return grade(
    "pass",
    `after each of ${cuts.length} cut(s) it stopped and reported what it played, within the bound`,
    evidence,
    exercised,
    "it stopped and reported what it played, within the bound",
  );
};

const playback: Grader = (input, steps, t0) => {
  const acks = steps.filter((s) => s.command?.type === "playback.ack");
  if (!steps.some((s) => s.events.some((e) => e.type === "AudioDelivered")))
    return broken("no answer's audio went out, so there was nothing to acknowledge: the app must ask for an answer");
  if (acks.length === 0)
    return input.unsupported.includes("playback")
      ? grade("unsupported", "the client declared it does not acknowledge playback", [])
      : grade("fail", "the client sent no playback.ack", []);
  const { cuts, items } = cutsOf(steps);
  const sentAt = new Map<string, number>();
  const last = new Map<string, number>();
  const evidence: Evidence[] = [];
  for (const s of steps) {
    for (const e of s.events)
      if (e.type === "AudioDelivered")
        sentAt.set(String(e.data.responseId), (sentAt.get(String(e.data.responseId)) ?? 0) + Number(e.data.durationMs));
    if (s.command?.type !== "playback.ack") continue;
    const ack = s.command;
    const response = ack.responseId ?? (ack.itemId === null ? null : (items.get(ack.itemId) ?? null));
    if (response === null) continue;
    const where = { revision: s.revision, at_ms: s.at - t0 };
    const sent = sentAt.get(response) ?? 0;
    if (ack.playedMs > sent + 1) {
      evidence.push({
        ...where,
        what: `playback.ack of ${response} at ${ack.playedMs} ms, ${Math.round(sent)} ms sent`,
      });
      return grade(
        "fail",
        `a playback.ack (${ack.playedMs} ms) went beyond what was sent (${Math.round(sent)} ms)`,
        evidence,
        ["playback.ack"],
        "a playback.ack went beyond what was sent",
      );
    }
    const before = last.get(response) ?? 0;
    if (ack.playedMs < before) {
      evidence.push({ ...where, what: `playback.ack of ${response} went back from ${before} to ${ack.playedMs} ms` });
      return grade("fail", "its playback.ack went back", evidence, ["playback.ack"]);
    }
    const cut = cuts.find((c) => c.response === response);
    if (cut !== undefined && s.at - cut.at > REPORT_WITHIN_MS) {
      evidence.push({ ...where, what: `playback.ack of ${response} ${s.at - cut.at} ms after it was cut` });
      return grade("fail", "it acknowledged an answer of the old epoch long after a barge-in cut it", evidence, [
        "playback.ack",
      ]);
    }
    last.set(response, ack.playedMs);
  }
  const first = acks[0] as Step;
  const lastAck = acks.at(-1) as Step;
  evidence.push(
    { revision: first.revision, at_ms: first.at - t0, what: "first playback.ack" },
    { revision: lastAck.revision, at_ms: lastAck.at - t0, what: "last playback.ack" },
  );
  return grade(
    "pass",
    `${acks.length} playback.ack, each growing and within what was sent`,
    evidence,
    ["playback.ack"],
    "each playback.ack grew and stayed within what was sent",
  );
};

const resume: Grader = (input, steps, t0) => {
  const dropped = actionOf(input, ["drop", "close"]);
  if (dropped === null)
    return broken("no answer's audio went out, so the connection was not dropped: the app must ask for an answer");
  const evidence: Evidence[] = [
    { revision: null, at_ms: dropped.at - t0, what: `peer: ${dropped.do} with ${dropped.on}` },
  ];
  const resumed = steps.find(
    (s) => s.at >= dropped.at && s.input === "AttachmentChanged" && s.events.some((e) => e.type === "SessionResumed"),
  );
  if (resumed === undefined) {
    if (input.unsupported.includes("resume"))
      return grade("unsupported", "the client declared it does not resume", evidence);
    const fresh = input.actions.find((a) => a.do === "new_session" && a.at >= dropped.at);
    if (fresh === undefined)
      return grade("fail", "the client did not resume the session after the connection dropped", evidence);
    evidence.push({ revision: null, at_ms: fresh.at - t0, what: "the client connected again with a new session" });
    return grade(
      "fail",
      `the client opened a new session ${fresh.at - dropped.at} ms after the drop instead of resuming this one (what it had been sent since its last ack is lost to it)`,
      evidence,
      [],
      "it opened a new session instead of resuming",
    );
  }
  evidence.push({
    revision: resumed.revision,
    at_ms: resumed.at - t0,
    what: `resumed ${resumed.at - dropped.at} ms after the drop`,
  });
  if (resumed.at - dropped.at > RESUME_WITHIN_MS)
    return grade(
      "fail",
      `it resumed ${resumed.at - dropped.at} ms after the drop (the bound is ${RESUME_WITHIN_MS} ms)`,
      evidence,
      ["resume"],
      "it resumed too late",
    );
  // Its acks: never beyond what was sent (invalid_event_ack), never back.
  let lastSeq = 0;
  for (const s of steps) {
    if (s.command?.type !== "session.event_ack") continue;
    const where = { revision: s.revision, at_ms: s.at - t0 };
    if (s.rejected !== null) {
      evidence.push({ ...where, what: `session.event_ack ${s.command.seq} refused: ${s.rejected}` });
      return grade(
        "fail",
        `an event ack was refused (${s.rejected})`,
        evidence,
        ["resume", "event ack"],
        "an event ack was refused",
      );
    }
    if (s.command.seq < lastSeq) {
      evidence.push({ ...where, what: `session.event_ack went back from ${lastSeq} to ${s.command.seq}` });
      return grade("fail", "its event acks went back: it handed an event to its app twice", evidence, [
        "resume",
        "event ack",
      ]);
    }
    lastSeq = s.command.seq;
  }
  return grade("pass", "it resumed with its token within the bound, and its event acks only grew", evidence, [
    "resume",
    "event ack",
  ]);
};

/**
 * After the server said the session cannot go on here (`session_resume_expired` or `session.resync_required` to a
 * resume, `session.replaced` to a socket another one superseded), the client does not try that session again.
 */
const noRetry: Grader = (input, _steps, t0) => {
  const dropped = actionOf(input, ["drop", "close", "replace"]);
  if (dropped === null)
    return broken("no answer's audio went out, so the connection was not cut: the app must ask for an answer");
  const evidence: Evidence[] = [
    { revision: null, at_ms: dropped.at - t0, what: `peer: ${dropped.do} with ${dropped.on}` },
  ];
  const ended = dropped.do === "replace" ? dropped : input.actions.find((a) => a.do === "refuse_resume");
  const fresh = input.actions.find((a) => a.do === "new_session");
  if (ended === undefined)
    return input.unsupported.includes("resume")
      ? grade("unsupported", "the client declared it does not resume", evidence)
      : grade(
          "informational",
          `the client did not try to resume${fresh === undefined ? "" : " (it opened a new session)"}, so it could not retry a refused token`,
          evidence,
          [],
          "it did not try to resume",
        );
  if (ended !== dropped) evidence.push({ revision: null, at_ms: ended.at - t0, what: "peer: session.resume refused" });
  const retries = input.actions.filter((a) => a.do === "resume_retry");
  for (const r of retries)
    evidence.push({ revision: null, at_ms: r.at - t0, what: "the client sent session.resume again" });
  const told = dropped.do === "replace" ? "session.replaced" : "the refused resume";
  if (retries.length > 0)
    return grade(
      "fail",
      `after ${told} it tried the same session again ${retries.length} time(s)`,
      evidence,
      ["resume"],
      "it retried a session the server said it cannot resume",
    );
  if (input.unsupported.includes("resume"))
    return grade("unsupported", "the client declared it does not resume", evidence);
  return grade("pass", `after ${told} it did not try the session again`, evidence, ["resume"]);
};

/**
 * The lease (BEHAVIOUR.md, "Session lifetime": `idle_ttl_s`): once the conversation is quiet, heartbeats or other
 * traffic keep the session from expiring idle for longer than its idle timeout (the session object's
 * `idle_timeout_s`, from the log's SessionOpened and SessionConfigured).
 */
const lease: Grader = (input, steps, t0) => {
  let ttlS: number | null = null;
  for (const e of input.entries) {
    const data = e.data as { idleTimeoutS?: number | null; config?: { idleTimeoutS?: number | null } };
    if (e.type === "SessionOpened" && data.idleTimeoutS !== undefined) ttlS = data.idleTimeoutS;
    if (e.type === "SessionConfigured" && data.config?.idleTimeoutS !== undefined) ttlS = data.config.idleTimeoutS;
  }
  if (ttlS === null) return broken("the session has no idle timeout, so there is no lease to keep");
  const last = input.entries.at(-1);
  const expired = input.entries.find(
    (e) => e.type === "SessionClosed" && (e.data as { reason?: string }).reason === "idle_ttl_expired",
  );
  // Quiet from the last response's end (or the last speech), whichever came last.
  const quietFrom = steps.findLast((s) =>
    s.events.some((e) => e.type === "ResponseEnded" || e.type === "SpeechStopped" || e.type === "InputCommitted"),
  );
  const from = quietFrom?.at ?? t0;
  const heartbeats = steps.filter((s) => s.at > from && s.command?.type === "session.heartbeat").length;
  const other = steps.filter((s) => s.at > from && s.command !== null && s.command.type !== "session.heartbeat").length;
  const evidence: Evidence[] = [];
  if (quietFrom !== undefined)
    evidence.push({ revision: quietFrom.revision, at_ms: from - t0, what: "the conversation went quiet" });
  const kept = `${heartbeats} heartbeat(s) and ${other} other command(s)`;
  if (expired !== undefined) {
    evidence.push({ revision: expired.revision, at_ms: expired.metadata.at - t0, what: "session expired: idle" });
    return grade(
      "fail",
      `the session expired idle ${Math.round((expired.metadata.at - from) / 1000)} s after the conversation went quiet (idle timeout ${ttlS} s; ${kept} in between)`,
      evidence,
      ["lease"],
      "the session expired idle: no heartbeat kept it",
    );
  }
  const quietMs = (last?.metadata.at ?? from) - from;
  if (last !== undefined)
    evidence.push({ revision: last.revision, at_ms: last.metadata.at - t0, what: `session ended (${last.type})` });
  if (quietMs <= ttlS * 1000)
    return broken(
      `the app left ${Math.round(quietMs / 1000)} s after the conversation went quiet: the case asks it to stay, silent, for longer than the idle timeout (${ttlS} s)`,
    );
  return grade(
    "pass",
    `quiet for ${Math.round(quietMs / 1000)} s, past the idle timeout of ${ttlS} s: ${kept} kept the session`,
    evidence,
    heartbeats > 0 ? ["lease", "heartbeat"] : ["lease"],
    "heartbeats or traffic kept the idle session alive",
  );
};

const GRADER_FUNCTIONS: Record<GraderName, Grader> = {
  "no-retry": noRetry,
  lease,
  handshake,
  "audio-rate": audioRate,
  "forward-compat": forwardCompat,
  "error-recovery": errorRecovery,
  "barge-in": bargeIn,
  playback,
  resume,
};

/**
 * Grades `input` (a session's log and what the peer did) by `clientCase`'s grader. A log that cannot be read grades
 * harness-broken. Pure.
 */
export const gradeCase = (clientCase: ClientCase, input: GradeInput): Grade => {
  const t0 = input.entries[0]?.metadata.at ?? 0;
  let steps: Step[];
  try {
    steps = stepsFor(input.entries);
  } catch (error) {
    return broken(`the session's log could not be read: ${(error as Error).message}`);
  }
  if (steps.length === 0) return broken("the client opened no session");
  return GRADER_FUNCTIONS[clientCase.grader](input, steps, t0);
};

/** The reference tone of `core.audio-rate` at `rateHz`: 1 s of `TONE_HZ` (half scale), then 1 s of silence. */
export const referenceTone = (rateHz: number): Int16Array => {
  const tone = new Int16Array(rateHz * 2);
  for (let i = 0; i < rateHz; i += 1) tone[i] = Math.round(16384 * Math.sin((2 * Math.PI * TONE_HZ * i) / rateHz));
  return tone;
};
