import { rm } from "node:fs/promises";
import { describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import { startTestServer } from "../support/server.ts";

describe("server shutdown", () => {
  it("stops promptly with a live session attached, closing its socket, and the session stays open in the log", async () => {
    const server = await startTestServer();
    const client = await RealtimeClient.connect(server.url);
    client.send({ type: "session.update", session: {} });
    const created = await client.waitFor("session.created", { since: 0 });
    const id = String((created.session as { id: string }).id);
    await server.close();
    const { code, reason } = await client.closed;
    // Service restart, with a reason: the client resumes after it (issue 9: not 1006, a dropped connection).
    expect(code).toBe(1012);
    expect(reason).toContain("resume");
    // A shutdown is a disconnect: nothing closed the session in its log.
    const { createSqliteEventStore } = await import("../../src/infra/event-store/index.ts");
    const store = createSqliteEventStore({ path: `${server.dataDir}/duplex.sqlite` });
    const entries = await store.read(`session-${id}`);
    await store.close();
    expect(entries.map((e) => e.type)).not.toContain("SessionClosed");
    expect(entries.map((e) => e.type)).toContain("SessionCreated");
    expect(entries.map((e) => e.type)).toContain("SessionDetached");
    await rm(server.dataDir, { recursive: true, force: true });
  }, 20_000);
});
