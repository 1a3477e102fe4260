import { mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/infra/config.ts";

/** Deployment files as a user writes them (issue 9, "Errors that say what to do"). */
describe("loadConfig", () => {
  let dir = "";
  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), "duplex-config-"));
    await mkdir(join(dir, "scripts"));
  });
  afterAll(async () => rm(dir, { recursive: true, force: true }));

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
});
