import { randomBytes } from "node:crypto";
import type { FastifyReply, FastifyRequest } from "fastify";
import { escapeMarkup } from "../infra/escape-markup.ts";
import { closeBidiControls } from "../replay/index.ts";

/**
 * What the server's HTML pages (`/sessions`, `/sessions/:id`) send so that a browser runs only their own code
 * (issue 32, part 3, "Browsers"): a Content-Security-Policy that allows the page's inline `<script>` and `<style>`
 * elements by a nonce drawn for each response, and nothing else (no inline `style="..."` attribute, no inline event
 * handler, no eval, no script or style from anywhere); audio from this origin; `fetch` to this origin only (the live
 * tail); never framed. wavesurfer.js writes a `<style>` into its shadow root, given the same nonce (its `cspNonce`
 * option); uPlot sets styles through the CSSOM, which a policy does not govern. The headers:
 *
 * - `Content-Security-Policy`: `contentSecurityPolicy(nonce)`.
 * - `X-Content-Type-Options: nosniff`: a response is read as its declared type only (a WAV or JSON body is never
 *   taken for HTML or script).
 * - `Referrer-Policy: no-referrer`: a link followed from a page does not carry its URL (session ids) elsewhere.
 * - `X-Frame-Options: DENY`: no framing, for browsers older than `frame-ancestors`.
 */
export type PageHeaders = Readonly<Record<string, string>>;

/** A fresh nonce for one response: 16 random bytes, base64 (CSP Level 3, "nonce-source": at least 128 bits). */
export const pageNonce = (): string => randomBytes(16).toString("base64");

/**
 * The policy of a page whose inline scripts and styles carry `nonce`: `default-src 'none'` and, one by one, what the
 * pages use: `script-src` and `style-src` the nonce only; `img-src 'self' data:` (the `data:,` favicon);
 * `media-src 'self'` (the players' WAVs from the session API: wavesurfer.js is given their peaks, so it sets the
 * URL on its `<audio>` and fetches no blob); `connect-src 'self'` (the live tail's `fetch` of `/events` and `timeline.json`); `frame-ancestors
 * 'none'`, `base-uri 'none'`, `form-action 'self'`.
 *
 * @throws Error when `nonce` is not base64 (it would break out of the header's grammar).
 */
export const contentSecurityPolicy = (nonce: string): string => {
  if (!/^[A-Za-z0-9+/]+={0,2}$/.test(nonce)) throw new Error(`a CSP nonce is base64, got ${JSON.stringify(nonce)}`);
  return [
    "default-src 'none'",
    `script-src 'nonce-${nonce}'`,
    `style-src 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "media-src 'self'",
    "connect-src 'self'",
    "frame-ancestors 'none'",
    "base-uri 'none'",
    "form-action 'self'",
  ].join("; ");
};

/** Every header of a page rendered with `nonce` (see `PageHeaders`), lower-case names. */
export const pageHeaders = (nonce: string): PageHeaders => ({
  "content-type": "text/html; charset=utf-8",
  "content-security-policy": contentSecurityPolicy(nonce),
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
});

/**
 * Sends an HTML page: draws a nonce, renders the page with it (`render` puts it on each of its inline `<script>`
 * and `<style>` elements) and sends it with `pageHeaders(nonce)`. The one way both pages are sent.
 */
export const sendPage = (reply: FastifyReply, render: (nonce: string) => string): FastifyReply => {
  const nonce = pageNonce();
  return reply.headers(pageHeaders(nonce)).send(render(nonce));
};

/**
 * An `onSend` hook that marks every response `X-Content-Type-Options: nosniff` (the session API's JSON, its WAVs,
 * errors), unless the route set the header itself. For app.ts: `app.addHook("onSend", noSniff)`. Responses a route
 * writes after `reply.hijack()` (the SSE tail) do not pass through it.
 */
export const noSniff = async (_request: FastifyRequest, reply: FastifyReply, payload: unknown): Promise<unknown> => {
  if (!reply.hasHeader("x-content-type-options")) reply.header("x-content-type-options", "nosniff");
  return payload;
};

/**
 * Client text in markup, isolated: `<bdi>`, the text escaped (`escapeMarkup`) with its open bidi controls closed
 * (`closeBidiControls`), `</bdi>`. An unclosed RLO or RLI in it cannot reverse the page's text after it.
 */
export const bdiMarkup = (text: string): string => `<bdi>${escapeMarkup(closeBidiControls(text))}</bdi>`;
