// The official `openai` SDK's chat completions against this server: each request is a session of its own, closed
// when answered and replayable (its id is the x-duplex-session-id response header).
//   node examples/openai-sdk-chat.mjs [http://127.0.0.1:8099]
import OpenAI from "openai";

const server = new URL(process.argv[2] ?? "http://127.0.0.1:8099");
const client = new OpenAI({ apiKey: process.env.OPENAI_API_KEY || "unused", baseURL: `${server.origin}/v1` });
const [model] = (await client.models.list()).data.map((m) => m.id);
const { data, response } = await client.chat.completions
  .create({ model, messages: [{ role: "user", content: "Hello from the SDK" }] })
  .withResponse();
console.log(data.choices[0].message.content);
console.log(`session: ${response.headers.get("x-duplex-session-id")}`);
const stream = await client.chat.completions.create({
  model,
  stream: true,
  messages: [{ role: "user", content: "Again" }],
});
for await (const chunk of stream) process.stdout.write(chunk.choices[0]?.delta.content ?? "");
console.log();
