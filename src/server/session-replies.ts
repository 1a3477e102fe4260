import type { FastifyReply } from "fastify";
import { handshakeErrorBody } from "../protocol/index.ts";

/** The session API's refusals, in OpenAI's error envelope: 404 `unknown_session` and 400 `bad_event`. */

export const notFound = (reply: FastifyReply, id: string) =>
  reply.code(404).send(handshakeErrorBody("unknown_session", `no session ${id} on this server`));

export const badRequest = (reply: FastifyReply, message: string) =>
  reply.code(400).send(handshakeErrorBody("bad_event", message));
