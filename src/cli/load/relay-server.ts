/**
 * The bare relay of `duplex bench load`: the baseline the server's CPU per session is compared with, run as a
 * process of its own (spawned by the bench, see `spawnScript`). A `ws` server on 127.0.0.1 (port 0, the OS picks)
 * that parses each text frame as JSON and, for each `input_audio_buffer.append`, decodes its base64 audio and sends
 * one `response.output_audio.delta` back holding those bytes, base64 again. Nothing else: no VAD, no log, no
 * resampling. It prints `{"type":"listening","port":N}` on stdout once it listens, and stops on SIGTERM.
 */
import { WebSocketServer } from "ws";

const server = new WebSocketServer({ host: "127.0.0.1", port: 0, perMessageDeflate: false });

server.on("connection", (socket) => {
  socket.on("message", (data: Buffer) => {
    const event = JSON.parse(data.toString()) as { type?: string; audio?: string };
    if (event.type !== "input_audio_buffer.append" || typeof event.audio !== "string") return;
    const audio = Buffer.from(event.audio, "base64");
    socket.send(JSON.stringify({ type: "response.output_audio.delta", delta: audio.toString("base64") }));
  });
});

server.on("listening", () => {
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  process.stdout.write(`${JSON.stringify({ type: "listening", port })}\n`);
});

process.once("SIGTERM", () => server.close(() => process.exit(0)));
