/**
 * One simple command of a shell snippet: its words after quote removal, and the 1-based line (of the snippet) it
 * starts on.
 */
export interface ShellCommand {
  readonly line: number;
  readonly words: readonly string[];
}

const SEPARATORS = [";", "&&", "||", "|", "&"];

/**
 * The simple commands of a POSIX shell snippet, as far as docs use the shell: lines joined at a trailing
 * backslash, `#` comments dropped, `'...'` and `"..."` quoting and `\` escapes removed, commands split at `;`,
 * `&&`, `||`, `|`, `&` and newlines, and a redirection's target (`> file`, `2>&1`) dropped. Loop keywords (`do`,
 * `then`, ...) that lead a command are dropped, so `for n in 1 2; do npx duplex ...; done` yields the `npx duplex`
 * command. No expansion: `$n` stays a word. @throws Error naming the line of an unclosed quote.
 */
export const shellCommands = (snippet: string): ShellCommand[] => {
  const commands: ShellCommand[] = [];
  let words: string[] = [];
  let word: string | null = null;
  let line = 1;
  let startLine = 1;
  let redirect = false;
  const endWord = (): void => {
    if (word === null) return;
    if (redirect) redirect = false;
    else words.push(word);
    word = null;
  };
  const endCommand = (): void => {
    endWord();
    while (words.length > 0 && ["do", "then", "else", "elif", "done", "fi", "{", "}"].includes(words[0] ?? ""))
      words.shift();
    if (words.length > 0) commands.push({ line: startLine, words });
    words = [];
  };
  for (let i = 0; i < snippet.length; i += 1) {
    const c = snippet[i] ?? "";
    if (words.length === 0 && word === null) startLine = line;
    if (c === "\\" && snippet[i + 1] === "\n") {
      i += 1;
      line += 1;
      continue;
    }
    if (c === "\\") {
      word = (word ?? "") + (snippet[i + 1] ?? "");
      i += 1;
      continue;
    }
    if (c === "'" || c === '"') {
      const close = snippet.indexOf(c, i + 1);
      if (close === -1) throw new Error(`line ${line}: unclosed ${c}`);
      word = (word ?? "") + snippet.slice(i + 1, close);
      line += snippet.slice(i + 1, close).split("\n").length - 1;
      i = close;
      continue;
    }
    if (c === "#" && word === null) {
      const end = snippet.indexOf("\n", i);
      i = (end === -1 ? snippet.length : end) - 1;
      continue;
    }
    if (c === "\n") {
      endCommand();
      line += 1;
      continue;
    }
    if (c === " " || c === "\t") {
      endWord();
      continue;
    }
    const separator = SEPARATORS.find((s) => snippet.startsWith(s, i));
    if (separator !== undefined && !(separator === "&" && snippet[i - 1] === ">")) {
      endCommand();
      i += separator.length - 1;
      continue;
    }
    if (c === ">" || c === "<") {
      // `2>&1`, `>>`, `> file`: the operator and its target are no words of the command.
      if (word !== null && /^\d$/.test(word)) word = null;
      endWord();
      while (snippet[i + 1] === ">" || snippet[i + 1] === "&") i += 1;
      redirect = true;
      continue;
    }
    word = (word ?? "") + c;
  }
  endCommand();
  return commands;
};

/**
 * The arguments a command gives the `duplex` program, or null when it runs something else: `npx duplex ARGS`,
 * `duplex ARGS`, `node bin/duplex.js ARGS` and `npm run dev -- ARGS` give ARGS; `npm start -- ARGS` gives
 * `serve ARGS` (the start script runs `duplex serve`). Leading `NAME=value` assignments are skipped, and a `$name`
 * word (a loop variable) becomes `1`.
 */
export const duplexArgs = (words: readonly string[]): string[] | null => {
  let rest = [...words];
  while (rest.length > 0 && /^[A-Za-z_][A-Za-z0-9_]*=/.test(rest[0] ?? "")) rest = rest.slice(1);
  const after = (n: number) => rest.slice(n).map((w) => (/^\$\{?\w+\}?$/.test(w) ? "1" : w));
  if (rest[0] === "npx" && rest[1] === "duplex") return after(2);
  if (rest[0] === "duplex") return after(1);
  if (rest[0] === "node" && rest[1] === "bin/duplex.js") return after(2);
  if (rest[0] === "npm" && rest[1] === "start") return ["serve", ...after(rest[2] === "--" ? 3 : 2)];
  if (rest[0] === "npm" && rest[1] === "run" && rest[2] === "dev" && rest[3] === "--") return after(4);
  return null;
};
