import { it } from "vitest";
import { append, audio, cancel, close, command, commit, create, given, opened, stage } from "./decider-spec.ts";

it("explore", () => {
  const T = 5_000_000;
  const g = given(
    opened(),
    command(create(), T - 10),
    stage(audio(1000, "hello"), T),
    command(cancel(), T + 400),
    command(append(320, 0), T + 500),
  );
  console.log(JSON.stringify(g.state.history));
  const w = g.when(command(commit(), T + 5000));
  console.log(JSON.stringify(w.events.map((e) => [e.type, e.type === "HistoryCommitted" ? e.data : null])));
  const w2 = g.when(command(close(), T + 5000));
  console.log(JSON.stringify(w2.events.map((e) => [e.type, e.type === "HistoryCommitted" ? e.data : null])));
  const w3 = g.when(command(create(), T + 5000));
  console.log(JSON.stringify(w3.events.map((e) => [e.type, e.type === "HistoryCommitted" ? e.data : null])));
});
