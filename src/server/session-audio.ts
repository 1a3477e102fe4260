import type { FastifyReply, FastifyRequest } from "fastify";
import { type EventStore, streamOf } from "../engine/index.ts";
import { encodeWav, pcm16FromBytes } from "../infra/audio/index.ts";
import { handshakeErrorBody } from "../protocol/index.ts";
import { audioOf, responseSamples } from "../replay/index.ts";
import { badRequest, notFound } from "./session-replies.ts";

/** A WAV reply named `name`: `samples` (PCM16 mono) at `rateHz`. */
const wav = (reply: FastifyReply, name: string, samples: Int16Array, rateHz: number) =>
  reply
    .header("content-type", "audio/wav")
    .header("content-disposition", `inline; filename="${name}"`)
    .send(Buffer.from(encodeWav(samples, rateHz)));

/**
 * `GET /v1/sessions/:id/input.wav` (what the model heard) and `.../responses/:response_id.wav` (a response as sent):
 * a session's audio read from its log (`audioOf`), as WAV (PCM16 mono at its rate). 404 `unknown_session`, 404
 * `response_not_found`, 400 `bad_event` when a response's audio does not decode.
 */
export const sessionAudio = (store: EventStore) => {
  const inputWav = async (request: FastifyRequest<{ Params: { id: string } }>, reply: FastifyReply) => {
    const { id } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    const { input } = audioOf(entries);
    return wav(reply, `${id}-input.wav`, pcm16FromBytes(input.pcm16), input.rateHz);
  };

  const responseWav = async (
    request: FastifyRequest<{ Params: { id: string; file: string } }>,
    reply: FastifyReply,
  ) => {
    const { id, file } = request.params;
    const entries = await store.read(streamOf(id));
    if (entries.length === 0) return notFound(reply, id);
    const responseId = file.replace(/\.wav$/, "");
    const response = audioOf(entries).responses.get(responseId);
    if (response === undefined || !file.endsWith(".wav"))
      return reply
        .code(404)
        .send(handshakeErrorBody("response_not_found", `no audio of a response ${responseId} in session ${id}`));
    const samples = responseSamples(response);
    if (!(samples instanceof Int16Array))
      return badRequest(reply, `the response's audio does not decode: ${samples.message}`);
    return wav(reply, `${responseId}.wav`, samples, response.rateHz);
  };
  return { inputWav, responseWav };
};
