import { readFile, writeFile } from "node:fs/promises";
import type { RecordedEntry } from "../../engine/ports/index.ts";
import { decodeData, encodeData } from "./codec.ts";

/** Format name and version of an exported session file (one JSON object a line). */
export const SESSION_FILE_FORMAT = "duplex-session";
export const SESSION_FILE_VERSION = 1;

/** The first line of a session file. */
export interface SessionFileHeader {
  readonly format: typeof SESSION_FILE_FORMAT;
  readonly version: number;
  readonly stream: string;
  readonly entries: number;
  /**
   * The chain value of the last entry when the file was written (src/engine/chain.ts), so a file cut short still
   * fails `duplex verify`; absent for a log written without a chain.
   */
  readonly chain_head?: string;
  /** The log's schema version (src/engine/upcast.ts): that of its first entry, 1 when it names none. */
  readonly schema?: number;
}

/**
 * Renders a recorded session as a self-contained file: a header line, then one log entry a line with its binary
 * audio as base64 next to the entry's data (the data's `{"$bin": [offset, length]}` references point into it).
 */
export const renderSessionFile = (stream: string, entries: readonly RecordedEntry[]): string => {
  const head = entries.at(-1)?.metadata.chain;
  const header: SessionFileHeader = {
    format: SESSION_FILE_FORMAT,
    version: SESSION_FILE_VERSION,
    stream,
    entries: entries.length,
    ...(typeof head === "string" ? { chain_head: head } : {}),
    schema: typeof entries[0]?.metadata.schema === "number" ? entries[0].metadata.schema : 1,
  };
  return `${[JSON.stringify(header), ...entries.map(renderEntryLine)].join("\n")}\n`;
};

/**
 * One log entry as a line of a session file (and as the data of a `/v1/sessions/:id/events` server-sent event):
 * `{revision, position, type, metadata, data, bin}`, its binary audio as base64 in `bin`.
 */
export const renderEntryLine = (e: RecordedEntry): string => {
  const { json, blob } = encodeData(e.data);
  return JSON.stringify({
    revision: e.revision,
    position: e.position,
    type: e.type,
    metadata: e.metadata,
    data: JSON.parse(json),
    bin: blob === null ? null : Buffer.from(blob).toString("base64"),
  });
};

/** Writes `renderSessionFile` to `path`. */
export const writeSessionFile = async (
  path: string,
  stream: string,
  entries: readonly RecordedEntry[],
): Promise<void> => {
  await writeFile(path, renderSessionFile(stream, entries));
};

/**
 * Parses a session file. @throws Error naming the line when the header is not a `duplex-session` of a known
 * version, a line is not JSON, or the entry count differs from the header's.
 */
export const parseSessionFile = (text: string): { header: SessionFileHeader; entries: RecordedEntry[] } => {
  const lines = text.split("\n").filter((l) => l.length > 0);
  let header: SessionFileHeader | null = null;
  try {
    header = JSON.parse(lines[0] ?? "null") as SessionFileHeader | null;
  } catch {
    header = null;
  }
  if (typeof header !== "object" || header === null || header.format !== SESSION_FILE_FORMAT) {
    throw new Error(
      `not a ${SESSION_FILE_FORMAT} file: its first line must be the header {"format":"${SESSION_FILE_FORMAT}",...} (write one with duplex export)`,
    );
  }
  if (header.version !== SESSION_FILE_VERSION) {
    throw new Error(
      `${SESSION_FILE_FORMAT} version ${header.version} is not supported (expected ${SESSION_FILE_VERSION})`,
    );
  }
  const entries = lines.slice(1).map((line, i): RecordedEntry => {
    let raw: {
      revision: number;
      position: number;
      type: string;
      metadata: RecordedEntry["metadata"];
      data: unknown;
      bin: string | null;
    };
    try {
      raw = JSON.parse(line);
    } catch (error) {
      throw new Error(`line ${i + 2}: not JSON (${(error as Error).message})`, { cause: error });
    }
    const blob = raw.bin === null ? null : Uint8Array.from(Buffer.from(raw.bin, "base64"));
    return {
      stream: header.stream,
      revision: raw.revision,
      position: raw.position,
      type: raw.type,
      metadata: raw.metadata,
      data: decodeData({ json: JSON.stringify(raw.data), blob }),
    };
  });
  if (entries.length !== header.entries) {
    throw new Error(`the header announces ${header.entries} entries but the file holds ${entries.length}`);
  }
  return { header, entries };
};

/** Reads and parses a session file. @throws as `parseSessionFile`, or the file system's error. */
export const readSessionFile = async (path: string) => parseSessionFile(await readFile(path, "utf8"));
