import Fastify from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { RealtimeClient } from "../../src/client/index.ts";
import {
  bdiMarkup,
  contentSecurityPolicy,
  noSniff,
  pageHeaders,
  pageNonce,
  sendPage,
} from "../../src/server/page-security.ts";
import { startTestServer } from "../support/server.ts";

/**
 * What the HTML pages send (issue 32, part 3, "Browsers"): the policy and headers of src/server/page-security.ts,
 * the nonce on every inline script and style of the pages the server serves and on nothing else, no inline style
 * or handler attribute (a nonce does not cover them), and the `nosniff` hook. The pages under their policy in
 * Chromium: test/e2e/timeline-browser.test.ts.
 */
describe("page security", () => {
  it("draws a fresh base64 nonce of 128 bits for each page", () => {
    const nonces = new Set(Array.from({ length: 100 }, pageNonce));
    expect(nonces.size).toBe(100);
    for (const nonce of nonces) expect(Buffer.from(nonce, "base64")).toHaveLength(16);
  });

  it("allows the page's own nonce and this origin, and nothing else", () => {
    expect(contentSecurityPolicy("abc+/=")).toBe(
      "default-src 'none'; script-src 'nonce-abc+/='; style-src 'nonce-abc+/='; img-src 'self' data:; media-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
    );
    expect(contentSecurityPolicy("abc")).not.toMatch(/unsafe|\*|https?:/);
  });

  it("refuses a nonce that could break out of the header", () => {
    expect(() => contentSecurityPolicy("x'; script-src *")).toThrow(/a CSP nonce is base64/);
    expect(() => contentSecurityPolicy("")).toThrow(/a CSP nonce is base64/);
  });

  it("sends a page with its headers and the nonce it was rendered with, and marks other responses nosniff", async () => {
    const app = Fastify();
    app.addHook("onSend", noSniff);
    app.get("/page", (_request, reply) => sendPage(reply, (nonce) => `<style nonce="${nonce}"></style>`));
    app.get("/json", async () => ({ ok: true }));
    app.get("/own", (_request, reply) => reply.header("x-content-type-options", "other").send("x"));
    try {
      const page = await app.inject("/page");
      const nonce = /nonce="([^"]+)"/.exec(page.body)?.[1] ?? "";
      expect(page.headers).toMatchObject({ ...pageHeaders(nonce) });
      expect(page.headers["content-security-policy"]).toContain(`'nonce-${nonce}'`);
      const json = await app.inject("/json");
      expect(json.headers["x-content-type-options"]).toBe("nosniff");
      expect(json.headers["content-security-policy"]).toBeUndefined();
      expect((await app.inject("/missing")).headers["x-content-type-options"]).toBe("nosniff");
      expect((await app.inject("/own")).headers["x-content-type-options"]).toBe("other");
    } finally {
      await app.close();
    }
  });

  it("isolates client text in markup: escaped, closed, in <bdi>", () => {
    expect(bdiMarkup('<b a="1">&')).toBe("<bdi>&lt;b a=&quot;1&quot;&gt;&amp;</bdi>");
    expect(bdiMarkup("evil \u202etext")).toBe("<bdi>evil \u202etext\u202c</bdi>");
  });
});

describe("the pages the server serves", () => {
  let server: Awaited<ReturnType<typeof startTestServer>>;
  let base = "";
  let id = "";
  beforeAll(async () => {
    server = await startTestServer();
    base = `http://127.0.0.1:${server.port}`;
    const client = await RealtimeClient.connect(server.url);
    id = String(((await client.waitFor("session.created", { since: 0 })).session as { id: string }).id);
    client.send({ type: "response.create", response: { instructions: "Answer." } });
    await client.waitFor("response.done", { since: 0 });
    client.send({ type: "session.close" });
    await client.closed;
  });
  afterAll(async () => {
    await server?.stop();
  });

  it.each(["/sessions", "/sessions/ID"])(
    "%s sends the policy, with its nonce on each inline script and style and no inline attribute",
    async (path) => {
      const response = await fetch(`${base}${path.replace("ID", id)}`);
      expect(response.status).toBe(200);
      const headers = Object.fromEntries(response.headers);
      const nonce = /script-src 'nonce-([^']+)'/.exec(headers["content-security-policy"] ?? "")?.[1] ?? "";
      expect(headers).toMatchObject(pageHeaders(nonce));
      const html = await response.text();
      // The markup, each script's code left out (the inlined libraries hold markup of their own in strings).
      const markup = html.replace(/(<script\b[^>]*>)[\s\S]*?<\/script>/g, "$1</script>");
      expect(markup).toContain("<table");
      const tags = [...markup.matchAll(/<(script|style)\b([^>]*)>/g)].map((m) => ({ tag: m[1], attributes: m[2] }));
      expect(tags.length).toBeGreaterThan(0);
      for (const { tag, attributes } of tags) {
        // A JSON data block is not run, so it needs no nonce.
        if (attributes?.includes('type="application/json"')) expect(attributes).not.toContain("nonce");
        else expect(`${tag}${attributes}`).toBe(`${tag} nonce="${nonce}"`);
      }
      // No style="..." and no onclick="..." (a nonce does not cover attributes).
      expect(markup).not.toMatch(/<[^>]+\s(style|on[a-z]+)=/);
      // A second request draws another nonce.
      const again = (await fetch(`${base}${path.replace("ID", id)}`)).headers.get("content-security-policy");
      expect(again).not.toContain(nonce);
    },
  );
});
