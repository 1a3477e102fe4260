/**
 * The two generations of the OpenAI Realtime protocol a client may speak. Recorded server events use the GA names
 * (reference/realtime-duplex-api.md, "Tier 1"); a client that announces the beta protocol (`OpenAI-Beta:
 * realtime=v1`, or the `openai-beta.realtime-v1` WebSocket subprotocol) gets the beta names of the output events
 * instead, renamed at the socket so that the log and `server_event_seq` are the same for both.
 */
export type Dialect = "ga" | "beta";

/** GA output event names and their beta spelling. */
export const BETA_OUTPUT_NAMES: Readonly<Record<string, string>> = {
  "response.output_audio.delta": "response.audio.delta",
  "response.output_audio.done": "response.audio.done",
  "response.output_audio_transcript.delta": "response.audio_transcript.delta",
  "response.output_audio_transcript.done": "response.audio_transcript.done",
  "response.output_text.delta": "response.text.delta",
  "response.output_text.done": "response.text.done",
};

/**
 * The dialect a client announces in its upgrade request: the `openai-beta` header (`realtime=v1`) or a
 * `openai-beta.realtime-v1` subprotocol means beta; anything else GA.
 */
export const dialectOf = (headers: { readonly [name: string]: string | string[] | undefined }): Dialect => {
  const beta = headers["openai-beta"];
  const values = Array.isArray(beta) ? beta : beta === undefined ? [] : [beta];
  if (values.some((v) => /realtime=v1/i.test(v))) return "beta";
  const protocols = headers["sec-websocket-protocol"];
  const offered = (Array.isArray(protocols) ? protocols.join(",") : (protocols ?? "")).split(",").map((p) => p.trim());
  return offered.includes("openai-beta.realtime-v1") ? "beta" : "ga";
};

/**
 * Renames a server event's JSON text for `dialect`. The type is the event's second key (after `event_id`), so
 * only that first `"type"` is rewritten; the rest of the text is unchanged.
 */
export const renderForDialect = (json: string, dialect: Dialect): string => {
  if (dialect === "ga") return json;
  const match = /"type":"(response\.output_(?:audio|audio_transcript|text)\.(?:delta|done))"/.exec(json.slice(0, 200));
  const beta = match?.[1] === undefined ? undefined : BETA_OUTPUT_NAMES[match[1]];
  return beta === undefined || match === null ? json : json.replace(match[0], `"type":"${beta}"`);
};
