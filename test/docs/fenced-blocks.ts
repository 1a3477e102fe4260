/**
 * One fenced code block of a Markdown file: `lang` is the info string's first word (```` ```ts no-run ````: `ts`),
 * `flags` the words after it, `line` the 1-based line of the opening fence, `code` the lines between the fences
 * (their indentation up to the fence's removed), ending in a newline.
 */
export interface FencedBlock {
  readonly file: string;
  readonly line: number;
  readonly lang: string;
  readonly flags: readonly string[];
  readonly code: string;
}

/**
 * Every fenced block of `markdown` (CommonMark: a fence is 3 or more backticks or tildes, indented at most 3 spaces
 * or under a list item, closed by a fence of the same character at least as long). An unclosed block runs to the
 * end of the file, as CommonMark reads it. `file` names the file in each block.
 */
export const fencedBlocks = (markdown: string, file: string): FencedBlock[] => {
  const lines = markdown.split("\n");
  const blocks: FencedBlock[] = [];
  for (let i = 0; i < lines.length; i += 1) {
    const open = /^(\s*)(`{3,}|~{3,})(.*)$/.exec(lines[i] ?? "");
    if (open === null) continue;
    const [, indent = "", fence = "", info = ""] = open;
    const words = info
      .trim()
      .split(/\s+/)
      .filter((w) => w !== "");
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j += 1) {
      const close = /^\s*(`{3,}|~{3,})\s*$/.exec(lines[j] ?? "");
      if (close?.[1] !== undefined && close[1][0] === fence[0] && close[1].length >= fence.length) break;
      const text = lines[j] ?? "";
      body.push(text.startsWith(indent) ? text.slice(indent.length) : text.trimStart());
    }
    blocks.push({
      file,
      line: i + 1,
      lang: words[0] ?? "",
      flags: words.slice(1),
      code: body.length === 0 ? "" : `${body.join("\n")}\n`,
    });
    i = j;
  }
  return blocks;
};
