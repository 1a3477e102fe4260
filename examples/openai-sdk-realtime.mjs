// The official `openai` SDK's realtime client against this server (npm install openai ws).
//   node examples/openai-sdk-realtime.mjs [http://127.0.0.1:8099]
// The SDK always builds a wss:// URL from its baseURL. Against a server with listen.tls, pass the certificate
// (`options: { ca }`); against a plain ws:// server, as here, the ws option `createConnection` opens a plain TCP
// socket in place of the TLS one.
import { connect } from "node:net";
import OpenAI from "openai";
import { OpenAIRealtimeWS } from "openai/realtime/ws";

const server = new URL(process.argv[2] ?? "http://127.0.0.1:8099");
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY || "unused", baseURL: `${server.origin}/v1` });
const [model] = (await client.models.list()).data.map((m) => m.id);
const rt = new OpenAIRealtimeWS(
  { model, options: { createConnection: () => connect({ host: server.hostname, port: Number(server.port) }) } },
  client,
);
rt.on("error", (error) => console.error("error:", error.message));
rt.on("response.output_text.delta", (event) => process.stdout.write(event.delta));
rt.on("response.done", (event) => {
  console.log(`\nresponse.done: ${event.response.status}`);
  rt.close(); // close code 1000: the server ends the session (client_closed)
});
rt.socket.on("open", () => {
  rt.send({ type: "session.update", session: { type: "realtime", output_modalities: ["text"] } });
  rt.send({
    type: "conversation.item.create",
    item: { type: "message", role: "user", content: [{ type: "input_text", text: "Hello from the SDK" }] },
  });
  rt.send({ type: "response.create" });
});
