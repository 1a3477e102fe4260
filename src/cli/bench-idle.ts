import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { RealtimeClient } from "../client/index.ts";
import { rssKib } from "./load/proc.ts";
import { freePort, startServerProcess } from "./server-process.ts";

/**
 * `duplex bench --only idle` (issue 10, part 9: at most 256 KB per idle session): a real server process, and
 * `sessions` sockets that each open a session, send one `session.update` and then only hold it. The baseline is the
 * same process with one such session. Prints the server's RSS (VmRSS of /proc/PID/status) with one session and with
 * all of them, and the difference per added session in KB.
 */
export interface IdleOptions {
  readonly sessions: number;
  readonly print: (line: Record<string, unknown>) => void;
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 2000));

export const benchIdle = async (o: IdleOptions): Promise<void> => {
  const dir = await mkdtemp(join(tmpdir(), "duplex-idle-"));
  const config = join(dir, "config.yaml");
  await writeFile(
    config,
    `duplex_session: { max_sessions: ${o.sessions + 8} }\nlisten: { max_connections_per_address: ${o.sessions * 2 + 64}, max_connections: ${o.sessions * 2 + 128} }\n`,
  );
  const port = await freePort();
  const { child } = await startServerProcess(port, join(dir, "data"), 60_000, ["--config", config]);
  const pid = child.pid ?? 0;
  const url = `ws://127.0.0.1:${port}/v1/realtime`;
  const clients: RealtimeClient[] = [];
  const open = async (): Promise<void> => {
    const client = await RealtimeClient.connect(url);
    client.send({ type: "session.update", session: { instructions: "idle" } });
    await client.waitFor("session.updated", { since: 0, timeoutMs: 60_000 });
    clients.push(client);
  };
  try {
    await open();
    await settle();
    const one = rssKib(pid);
    for (let n = 1; n < o.sessions; n += 20) {
      await Promise.all(Array.from({ length: Math.min(20, o.sessions - n) }, open));
    }
    await settle();
    const all = rssKib(pid);
    o.print({
      bench: "idle",
      meaning: "RSS per idle session (open, configured, silent) against the same process with one: lower is better",
      sessions: clients.length,
      rss_mib_one_session: Math.round(one / 102.4) / 10,
      rss_mib_all_sessions: Math.round(all / 102.4) / 10,
      kb_per_idle_session: Math.round((all - one) / (clients.length - 1)),
    });
  } finally {
    await Promise.all(clients.map((c) => c.terminate()));
    child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  }
};
