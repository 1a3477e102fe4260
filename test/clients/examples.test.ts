import { execFile } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { STREAM_PREFIX } from "../../src/engine/index.ts";
import { startTestServer } from "../support/server.ts";

/** The SDK examples the README shows (examples/*.mjs), run as a user runs them, against a default server. */
const run = promisify(execFile);

describe("the README's SDK examples", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  beforeAll(async () => {
    server = await startTestServer();
  });
  afterAll(async () => {
    await server.stop();
  });

  it("examples/openai-sdk-realtime.mjs reaches ws:// through createConnection, gets a text answer, and its close ends the session", async () => {
    const { stdout, stderr } = await run(process.execPath, [
      "examples/openai-sdk-realtime.mjs",
      `http://127.0.0.1:${server.port}`,
    ]);
    expect(stderr).toBe("");
    expect(stdout).toBe("You wrote: Hello from the SDK\nresponse.done: completed\n");
    const streams = await server.store.listStreams(STREAM_PREFIX);
    expect(streams).toHaveLength(1);
    await expect
      .poll(async () =>
        (await server.store.read(streams[0]?.stream ?? ""))
          .filter((e) => e.type === "SessionClosed")
          .map((e) => (e.data as { reason: string }).reason),
      )
      .toEqual(["client_closed"]);
  });

  it("the README's realtime snippet runs as written (its port replaced by the test server's) and prints the answer", async () => {
    const readme = await readFile("README.md", "utf8");
    const snippet = /```js\n([\s\S]*?)```/.exec(readme)?.[1] ?? "";
    expect(snippet).toContain("port: 8099");
    // Beside the examples, so that `openai` resolves from this package's node_modules.
    const file = `examples/.readme-snippet-${process.pid}.mjs`;
    await writeFile(file, snippet.replaceAll("8099", String(server.port)));
    try {
      const { stdout, stderr } = await run(process.execPath, [file], { timeout: 20_000 });
      expect(stderr).toBe("");
      expect(stdout).toBe("You wrote: Hello\n");
    } finally {
      await rm(file, { force: true });
    }
  });

  it("examples/openai-sdk-chat.mjs gets an answer, the session that served it, and a streamed answer", async () => {
    const { stdout, stderr } = await run(process.execPath, [
      "examples/openai-sdk-chat.mjs",
      `http://127.0.0.1:${server.port}`,
    ]);
    expect(stderr).toBe("");
    expect(stdout).toMatch(/^You wrote: Hello from the SDK\nsession: sess_\w+\nYou wrote: Again\n$/);
  });
});
