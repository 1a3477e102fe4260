import { describe, expect, it } from "vitest";
import { sniffEventId } from "../../src/protocol/decode.ts";
import { frameEventId, frameKind, peekFrame } from "../../src/protocol/frame-peek.ts";
import { topLevelString } from "../../src/protocol/json-scan.ts";

/** Frame peeking (issue 34, part 3): a frame's kind, size and event_id before it is decoded, by a bounded tokenizer. */
describe("frame peek", () => {
  it("reads the kind of each append, commit and resume alias and of any other event", () => {
    expect(frameKind('{"type":"input_audio_buffer.append","audio":"AAAA"}')).toBe("append");
    expect(frameKind('{"type":"input.audio.append"}')).toBe("append");
    expect(frameKind('{"type":"push_chunk"}')).toBe("append");
    expect(frameKind('{"type":"input_audio_buffer.commit"}')).toBe("commit");
    expect(frameKind('{"type":"input.commit"}')).toBe("commit");
    expect(frameKind('{"type":"session.resume","session_id":"s"}')).toBe("resume");
    expect(frameKind('{"type":"session.update"}')).toBe("event");
    expect(frameKind(null)).toBe("event");
  });

  it("finds the type after other members and across whitespace", () => {
    expect(frameKind('{"event_id":"e1", "audio":"AAAA" ,\n\t "type" \r\n:  "input_audio_buffer.append"}')).toBe(
      "append",
    );
    expect(frameKind(' { "type" : "session.resume" }')).toBe("resume");
  });

  it("takes no type from inside a string value, escaped quotes included", () => {
    expect(frameKind('{"event_id":"\\"type\\":\\"session.resume\\"","type":"session.update"}')).toBe("event");
    expect(frameKind('{"event_id":"a\\\\","type":"input.commit"}')).toBe("commit");
    expect(frameKind('{"note":"\\"type\\":\\"push_chunk\\""}')).toBe("event");
  });

  it("takes no type from a nested object or an array", () => {
    expect(frameKind('{"item":{"type":"session.resume"},"type":"conversation.item.create"}')).toBe("event");
    expect(frameKind('[{"type":"input_audio_buffer.append"}]')).toBe("event");
    expect(frameKind('{"a":[{"type":"input.commit"}],"type":"input.commit"}')).toBe("commit");
  });

  it("matches the value exactly: an escaped, prefixed or non-string type is an event", () => {
    expect(frameKind('{"type":"session\\u002eresume"}')).toBe("event");
    expect(frameKind('{"typ\\u0065":"session.resume"}')).toBe("event");
    expect(frameKind('{"type":"session.resumed"}')).toBe("event");
    expect(frameKind('{"type":1}')).toBe("event");
    expect(topLevelString('{"type":"x\\"y"}', "type")).toBe('x\\"y');
  });

  it("finds the type wherever it stands: after an append's audio, or a resume's padding (an attack on issue 34)", () => {
    const audio = "A".repeat(20 * 1024 * 1024);
    expect(frameKind(`{"audio":"${audio}","event_id":"a201","type":"input_audio_buffer.append"}`)).toBe("append");
    expect(frameKind(`{"type":"input_audio_buffer.append","audio":"${audio}"}`)).toBe("append");
    expect(frameKind(`{"pad":"${"x".repeat(400)}","type":"session.resume","session_id":"s"}`)).toBe("resume");
    expect(frameKind(`{"type":"push_chunk"${" ".repeat(400)}}`)).toBe("append");
    // Escaped quotes and backslashes before the type are skipped as string content.
    expect(frameKind(`{"note":"${'\\\\\\"'.repeat(1000)}","type":"input.commit"}`)).toBe("commit");
    // A text that breaks off or is not an object has no type.
    expect(frameKind(`{"type":"input.com`)).toBe("event");
    expect(frameKind(`{"a":"${audio}`)).toBe("event");
    expect(frameKind('["type","input.commit"]')).toBe("event");
    expect(frameKind('{"a":1}{"type":"input.commit"}')).toBe("event");
  });

  it("echoes the top-level event_id of a frame it cannot parse, never a nested one (an attack on issue 34)", () => {
    expect(sniffEventId('{"session":{"type":"x","event_id":"inner"},"type":"session.update","event_id":"outer"}')).toBe(
      "outer",
    );
    expect(sniffEventId('{"a":[{"event_id":"innermany"}],"event_id":"outermany"')).toBe("outermany");
    expect(sniffEventId('{"event_id":"outer","type":"bogus",')).toBe("outer");
    expect(sniffEventId('{"event_id":"e\\u0031\\"q"}')).toBe('e1"q');
    expect(sniffEventId('{"event_\\u0069d":"x"}')).toBeNull();
    expect(sniffEventId(`{"event_id":"${"e".repeat(513)}"}`)).toBeNull();
    expect(sniffEventId('{"event_id":""}')).toBeNull();
    expect(sniffEventId('{"event_id":7}')).toBeNull();
    expect(sniffEventId('{"note":"\\"event_id\\":\\"fake\\""}')).toBeNull();
  });

  it("peeks a text frame's size in bytes, a binary frame's event_id, and a frame over the maximum by its head", () => {
    const text = '{"event_id":"é1","type":"input.commit"}';
    const peeked = peekFrame(Buffer.from(text), false);
    expect({ ...peeked, eventId: peeked.eventId() }).toEqual({
      text,
      bytes: Buffer.byteLength(text),
      kind: "commit",
      eventId: "é1",
    });
    const binary = peekFrame([Buffer.from(text.slice(0, 10)), Buffer.from(text.slice(10))], true);
    expect({ ...binary, eventId: binary.eventId() }).toEqual({
      text: null,
      bytes: Buffer.byteLength(text),
      kind: "event",
      eventId: "é1",
    });
    expect(frameEventId(Buffer.from(text))).toBe("é1");
    const over = Buffer.from(`{"event_id":"big","type":"push_chunk","audio":"${"A".repeat(16 * 1024 * 1024)}"}`);
    const big = peekFrame(over, false);
    expect(big.bytes).toBe(over.byteLength);
    expect(big.text?.length).toBe(2048);
    expect(big.kind).toBe("append");
    expect(big.eventId()).toBe("big");
  });
});
