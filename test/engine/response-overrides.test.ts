import { afterEach, describe, expect, it } from "vitest";
import { replayEntries } from "../../src/replay/index.ts";
import { type EngineSession, openEngineSession } from "../support/engine-session.ts";

/**
 * What a `response.create` asks of its own response beyond the session (issue 35, part 3; OpenAI Realtime,
 * "response.create"): a voice or an output format is taken when it is the session's and refused with a code when it
 * is another, never ignored; a field the response does not have is refused, naming it. In process, on the echo.
 */
let session: EngineSession | null = null;
afterEach(async () => {
  await session?.close();
  session = null;
});

const ask = async (s: EngineSession, event: Record<string, unknown>, type: string) => {
  const since = s.sent.length;
  await s.send(event);
  return s.waitFor(type, { since });
};

const opened = async (patch: Record<string, unknown> = {}) => {
  const s = await openEngineSession();
  await ask(
    s,
    { type: "session.update", session: { instructions: "Answer.", turn_detection: null, ...patch } },
    "session.updated",
  );
  return s;
};

describe("response.create overrides", () => {
  it("refuses a voice that is not the session's with response_override_unsupported, and takes the session's own", async () => {
    session = await opened({ voice: "marin" });
    const refused = await ask(
      session,
      { type: "response.create", event_id: "evt_voice", response: { voice: "alloy" } },
      "error",
    );
    expect(refused.error).toMatchObject({
      type: "invalid_request_error",
      code: "response_override_unsupported",
      param: "response.voice",
      event_id: "evt_voice",
    });
    expect(session.types()).not.toContain("response.created");
    const ga = await ask(
      session,
      { type: "response.create", event_id: "evt_ga", response: { audio: { output: { voice: "cedar" } } } },
      "error",
    );
    expect(ga.error).toMatchObject({ code: "response_override_unsupported", event_id: "evt_ga" });
    const done = await ask(session, { type: "response.create", response: { voice: "marin" } }, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
    expect(replayEntries(await session.log()).ok).toBe(true);
  });

  it("refuses an output format that is not the session's with unsupported_audio_format, and takes the session's own", async () => {
    session = await opened();
    const beta = await ask(
      session,
      { type: "response.create", event_id: "evt_ulaw", response: { output_audio_format: "g711_ulaw" } },
      "error",
    );
    expect(beta.error).toMatchObject({
      code: "unsupported_audio_format",
      param: "response.output_audio_format",
      event_id: "evt_ulaw",
    });
    const unknown = await ask(
      session,
      { type: "response.create", event_id: "evt_mp3", response: { output_audio_format: "mp3" } },
      "error",
    );
    expect(unknown.error).toMatchObject({ code: "unsupported_audio_format", event_id: "evt_mp3" });
    expect(session.types()).not.toContain("response.created");
    const same = {
      type: "response.create",
      response: { audio: { output: { format: { type: "audio/pcm", rate: 24000 } } } },
    };
    const done = await ask(session, same, "response.done");
    expect(done.response).toMatchObject({ status: "completed" });
  });

  it("refuses a field the response does not have, naming it, and changes nothing", async () => {
    session = await opened();
    const refused = await ask(
      session,
      { type: "response.create", event_id: "evt_typo", response: { instrutions: "Hi" } },
      "error",
    );
    expect(refused.error).toMatchObject({ type: "invalid_request_error", code: "bad_event", event_id: "evt_typo" });
    expect((refused.error as { message: string }).message).toContain("instrutions");
    const nested = await ask(
      session,
      { type: "response.create", event_id: "evt_nested", response: { audio: { output: { speed: 2 } } } },
      "error",
    );
    expect(nested.error).toMatchObject({ code: "bad_event", event_id: "evt_nested" });
    expect((nested.error as { message: string }).message).toContain("speed");
    expect(session.types()).not.toContain("response.created");
  });
});
