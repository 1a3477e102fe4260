import { request } from "node:http";

/** The answer to a WebSocket upgrade request: 101 (the socket was opened, then dropped) or the HTTP refusal. */
export interface UpgradeAnswer {
  readonly status: number;
  readonly retryAfter: string | null;
  /** The body of a refusal, parsed when it is JSON (null for 101 or an empty body). */
  readonly body: unknown;
}

/** `text` as JSON, or as it is when it is not JSON. */
const parsed = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

/**
 * Sends a raw WebSocket upgrade request for `path` (sent exactly as written: percent-encodings and all) to
 * 127.0.0.1:`port` with `headers`, and reads the answer. The socket of a 101 is destroyed at once.
 */
export const upgradeRequest = (
  port: number,
  path: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<UpgradeAnswer> =>
  new Promise((resolve, reject) => {
    const req = request({
      host: "127.0.0.1",
      port,
      path,
      agent: false,
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": Buffer.from("0123456789abcdef").toString("base64"),
        ...headers,
      },
    });
    req.once("upgrade", (response, socket) => {
      socket.destroy();
      resolve({ status: response.statusCode ?? 0, retryAfter: null, body: null });
    });
    req.once("response", (response) => {
      let text = "";
      response.on("data", (chunk: Buffer) => {
        text += chunk.toString();
      });
      response.once("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          retryAfter: (response.headers["retry-after"] as string | undefined) ?? null,
          body: text === "" ? null : parsed(text),
        }),
      );
    });
    req.once("error", reject);
    req.end();
  });
