import OpenAI from "openai";
import { describe, expect, it } from "vitest";
import { STREAM_PREFIX } from "../../src/engine/index.ts";
import { startTestServer } from "../support/server.ts";

/**
 * `POST /v1/chat/completions` under a model profile (issue 19, part 7): what the session refuses is the request's
 * refusal. Not in test/clients: the chain run puts an upstream front without the profile before the server.
 */
const clientOf = (server: Awaited<ReturnType<typeof startTestServer>>) =>
  new OpenAI({ apiKey: "test", baseURL: `http://127.0.0.1:${server.port}/v1`, maxRetries: 0 });

describe("chat completions under a model profile", () => {
  it("a request the session refuses (tools for a model without them) is a 400 with the session's code, and no response runs", async () => {
    const server = await startTestServer({ runner: { kind: "echo", profile: "personaplex" } });
    try {
      const { data: refused, response } = await clientOf(server)
        .chat.completions.create({
          model: server.model,
          tools: [{ type: "function", function: { name: "get_weather" } }],
          messages: [{ role: "user", content: "What's the weather?" }],
        })
        .withResponse()
        .then(
          (r) => ({ data: r as unknown, response: r.response }),
          (error: unknown) => ({ data: error, response: null }),
        );
      expect(response).toBeNull();
      expect(refused).toBeInstanceOf(OpenAI.BadRequestError);
      expect(refused).toMatchObject({ status: 400, code: "tool_calls_unsupported" });
      const [session] = await server.store.listStreams(STREAM_PREFIX);
      const log = await server.store.read(session?.stream ?? "");
      expect(log.some((e) => e.type === "ResponseStarted")).toBe(false);
      expect(log.filter((e) => e.type === "SessionClosed").map((e) => (e.data as { reason: string }).reason)).toEqual([
        "session_close",
      ]);
    } finally {
      await server.stop();
    }
  });
});
