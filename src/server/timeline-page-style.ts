/** Widths of the plots' y axes, px: every lane is inset by them so that one time axis lines up. */
export const LEFT = 72;
export const RIGHT = 44;

/** The timeline page's style sheet (served with the page's CSP nonce). */
export const PAGE_CSS = `
body { font: 14px system-ui, sans-serif; margin: 16px 20px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; } h2 { font-size: 13px; margin: 10px 0 2px; color: #555; font-weight: 600; }
#toolbar { display: flex; gap: 6px; align-items: center; margin: 8px 0; } #toolbar button { font-size: 12px; }
#lanes { position: relative; user-select: none; }
.lane { position: relative; height: 26px; background: #f4f4f4; border-radius: 3px; margin: 0 ${RIGHT}px 0 ${LEFT}px; overflow: hidden; cursor: grab; }
.row { position: relative; } .row > .label { position: absolute; left: 0; width: ${LEFT - 4}px; top: 6px; font-size: 11px; color: #666; text-align: right; }
.bar { position: absolute; top: 3px; height: 20px; border-radius: 3px; box-sizing: border-box; border-right: 1px solid #fff; font-size: 11px; color: #fff; overflow: hidden; white-space: nowrap; cursor: pointer; }
.bar.speech { background: #5a7; } .bar.completed { background: #37a; } .bar.cancelled { background: #c73; }
.bar.failed, .bar.incomplete { background: #c33; } .bar.open { background: #999; }
.bar.span { height: 10px; top: 2px; border-radius: 2px; } .span.commit { background: #9b7; } .span.created { background: #79b; } .span.first-audio { background: #37a; } .span.first-ack { background: #a7c; }
.tick { position: absolute; top: 0; width: 3px; margin-left: -1px; height: 26px; cursor: pointer; background: #333; }
.tick.generated { background: #999; } .tick.played { background: #37a; } .tick.heard { background: #2a2; } .tick.cut { background: #c33; width: 4px; }
.tick.commit, .tick.transcript { background: #5a7; } .tick.barge-in, .tick.cancel { background: #c73; } .tick.error { background: #c33; }
.tick.overlap, .tick.listen, .tick.speak { background: #37a; } .tick.detach, .tick.resume, .tick.restart, .tick.takeover { background: #a7c; } .tick.tool-call, .tick.truncate { background: #b93; }
.selected { outline: 2px solid #fc0; background-color: #ffe9a8; }
#playhead { position: absolute; top: 0; bottom: 0; width: 2px; background: #c33; pointer-events: none; }
#player { min-height: 48px; }
#marks { font: 12px ui-monospace, monospace; max-height: 260px; overflow: auto; padding-left: 44px; } #marks li { cursor: pointer; }
#detail { font: 12px ui-monospace, monospace; background: #f7f7f7; padding: 8px; white-space: pre-wrap; min-height: 2em; }
table { border-collapse: collapse; font-size: 12px; } td, th { padding: 2px 10px; text-align: right; } td:first-child, th:first-child, td:nth-child(6) { text-align: left; }
`;
