import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EVENT_STORE_URL_ENV, loadConfig } from "../../src/infra/config.ts";

/** Deployment files as a user writes them (issue 9, "Errors that say what to do"). */
describe("loadConfig", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-config-"));
    await mkdir(join(dir, "scripts"));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

  it("refuses a retention.older_than without a unit (other than 0), whether YAML reads it as a number or a string", async () => {
    for (const value of ["7", '"7"']) {
      const file = join(dir, "retention.yaml");
      await writeFile(file, `retention:\n  older_than: ${value}\n`);
      await expect(loadConfig(file)).rejects.toThrow(
        /retention\.older_than: expected a duration with its unit, such as 7d, 12h, 30m or 45s/,
      );
    }
    const file = join(dir, "retention-ok.yaml");
    await writeFile(file, "retention:\n  older_than: 7d\n");
    expect((await loadConfig(file)).retention).toEqual({ older_than: 7 * 86_400_000 });
  });

  it("reads every file of deploy/, the PostgreSQL and KurrentDB stores included, and refuses a store URL of the wrong kind", async () => {
    const files = (await readdir(join(process.cwd(), "deploy"))).filter((f) => f.endsWith(".yaml"));
    const kinds = new Map<string, string>();
    for (const f of files) kinds.set(f, (await loadConfig(join(process.cwd(), "deploy", f))).event_store.kind);
    expect(kinds.get("postgres.yaml")).toBe("postgres");
    expect(kinds.get("kurrentdb.yaml")).toBe("kurrentdb");
    expect(kinds.get("embedded.yaml")).toBe("sqlite");
    expect((await loadConfig(join(process.cwd(), "deploy", "postgres.yaml"))).event_store).toEqual({
      kind: "postgres",
      url: "postgres://duplex@127.0.0.1:5432/duplex",
      poll_ms: 100,
    });
    const file = join(dir, "store.yaml");
    await writeFile(file, "event_store:\n  kind: postgres\n  url: mysql://x\n");
    await expect(loadConfig(file)).rejects.toThrow(/event_store\.url: a postgres:\/\/ URL/);
  });

  it("names the file, line and column of a YAML syntax error", async () => {
    const file = join(dir, "bad.yaml");
    await writeFile(file, "runner:\n  kind: echo\n bad: [\n");
    await expect(loadConfig(file)).rejects.toMatchObject({
      name: "ConfigError",
      message: `${file}:3:1: YAML syntax error: All mapping items must start at the same column`,
    });
  });

  it("resolves the files a config names against the config's folder, and leaves absolute paths and event_store alone", async () => {
    const file = join(dir, "deploy.yaml");
    await writeFile(
      file,
      [
        "runner: { kind: scripted, script: scripts/greeting.yaml }",
        "listen: { tls: { cert: tls/cert.pem, key: /etc/key.pem } }",
        "event_store: { kind: sqlite, path: ./data/duplex.sqlite }",
        "",
      ].join("\n"),
    );
    const config = await loadConfig(file);
    expect(config.runner).toMatchObject({ script: join(dir, "scripts/greeting.yaml") });
    expect(config.listen.tls).toEqual({ cert: join(dir, "tls/cert.pem"), key: "/etc/key.pem" });
    expect(config.event_store).toMatchObject({ path: "./data/duplex.sqlite" });
  });

  describe("DUPLEX_EVENT_STORE_URL", () => {
    const cluster = join(process.cwd(), "deploy", "cluster.yaml");

    it("replaces the configured PostgreSQL store's URL and keeps its poll_ms", async () => {
      expect(EVENT_STORE_URL_ENV).toBe("DUPLEX_EVENT_STORE_URL");
      const env = { DUPLEX_EVENT_STORE_URL: "postgres://duplex:s3cret@db.internal:6432/sessions" };
      const config = await loadConfig(cluster, env);
      expect(config.event_store).toEqual({
        kind: "postgres",
        url: "postgres://duplex:s3cret@db.internal:6432/sessions",
        poll_ms: 100,
      });
      // The rest of the file is as it was.
      expect(config.node.lease_s).toBe(10);
      expect(config.retention).toEqual({ older_than: 30 * 86_400_000 });
    });

    it("makes the store of the URL's kind whatever the file (or no file) configured", async () => {
      expect((await loadConfig(undefined, { DUPLEX_EVENT_STORE_URL: "postgresql://u@h/d" })).event_store).toEqual({
        kind: "postgres",
        url: "postgresql://u@h/d",
        poll_ms: 100,
      });
      const embedded = join(process.cwd(), "deploy", "embedded.yaml");
      expect(
        (await loadConfig(embedded, { DUPLEX_EVENT_STORE_URL: "kurrentdb://db:2113?tls=false" })).event_store,
      ).toEqual({ kind: "kurrentdb", url: "kurrentdb://db:2113?tls=false" });
      // A postgres file given a KurrentDB URL drops poll_ms, which KurrentDB has not.
      expect((await loadConfig(cluster, { DUPLEX_EVENT_STORE_URL: "esdb://db:2113" })).event_store).toEqual({
        kind: "kurrentdb",
        url: "esdb://db:2113",
      });
    });

    it("leaves the file's store alone when unset or empty", async () => {
      for (const env of [{}, { DUPLEX_EVENT_STORE_URL: "" }]) {
        expect((await loadConfig(cluster, env)).event_store).toEqual({
          kind: "postgres",
          url: "postgres://duplex@127.0.0.1:5432/duplex",
          poll_ms: 100,
        });
        expect((await loadConfig(undefined, env)).event_store).toEqual({
          kind: "sqlite",
          path: "./data/duplex.sqlite",
        });
      }
    });

    it("refuses a URL of no store's kind, naming the variable and the scheme but never the URL", async () => {
      const env = { DUPLEX_EVENT_STORE_URL: "mysql://duplex:s3cret@db/duplex" };
      const refusal = loadConfig(cluster, env);
      await expect(refusal).rejects.toMatchObject({
        name: "ConfigError",
        message: "DUPLEX_EVENT_STORE_URL: expected a postgres:// URL or a kurrentdb:// connection string, got mysql:",
      });
      await expect(loadConfig(undefined, { DUPLEX_EVENT_STORE_URL: "db.internal:5432" })).rejects.toThrow(
        /DUPLEX_EVENT_STORE_URL: expected .*, got db\.internal:$/,
      );
      await expect(loadConfig(undefined, { DUPLEX_EVENT_STORE_URL: "/var/db" })).rejects.toThrow(/got no scheme$/);
    });
  });
});
