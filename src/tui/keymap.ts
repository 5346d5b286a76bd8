// What each key does: one key at a time against the user's choices (UiState), so that the keys of
// one read count once each, in order. The current screen is asked first (its own keys: Enter, Esc,
// s, I… in its file, src/tui/screens/*); the keys every screen shares are here. Commands go
// through the controller; nothing here draws. htop's function keys are the same keys by another
// name: F1 help, F3 search, F4 filter, F6 sort, F9 kill, F10 quit.
import type { Key } from "./keys";
import { SCREENS, screenIndex } from "./registry";
import type { KeyContext } from "./screen-spec";
import { earlier, later, nextPeakView } from "./moment";
import type { UiState } from "./ui-state";

export type { KeyContext };

const OVERVIEW = screenIndex("overview");
const HELP = screenIndex("help");

/** Lines above a screen's body: the tab line. */
export const BODY_TOP = 2;

/** Shows screen `to` as Enter opens it: Esc there goes back to the screen it was opened from. The
 *  list stays one path (the screens opened from the one shown, and so on back), at most as long as
 *  there are screens. */
export function openScreen(ui: UiState, to: number): void {
  const at = ui.opened.findIndex((o) => o.screen === ui.screen);
  ui.opened = at >= 0 ? ui.opened.slice(0, at + 1) : [];
  ui.opened.push({ screen: to, from: ui.screen });
  ui.screen = to;
}

/** Esc with nothing of the screen's own to close: Help back to where `?` was pressed; a kept
 *  filter cleared; the past back to now; back to the screen Enter was pressed on; the Overview. */
function back(ui: UiState, ctx: KeyContext): void {
  const screen = ui.screen;
  if (screen === HELP) return void (ui.screen = ui.back ?? OVERVIEW);
  if (ui.filter !== "") {
    ui.filter = "";
    return ctx.ctl.say("filter cleared (Esc again: back)");
  }
  if (ui.when !== null) return void (ui.when = null);
  const top = ui.opened.at(-1);
  if (top && top.screen === screen) return void (ui.opened.pop(), (ui.screen = top.from));
  ui.opened = [];
  ui.screen = OVERVIEW;
}

/** The next row from `from` (itself where `inclusive`), round, whose text holds the search. */
function findRow(ui: UiState, ctx: KeyContext, from: number, inclusive: boolean): void {
  const s = ui.search!;
  const texts = ctx.rowTexts(ui);
  const want = s.text.toLowerCase();
  if (!texts.length) return void (s.found = want === ""); // no rows (yet): nothing to find
  for (let k = inclusive ? 0 : 1; k <= texts.length; k++) {
    const i = (from + k) % texts.length;
    if (texts[i]!.toLowerCase().includes(want)) {
      s.found = true;
      return select(ui, ctx, () => i);
    }
  }
  s.found = want === "";
}

/** A key while F3's search is typed: it grows or shrinks the text (the selection follows), F3
 *  goes to the next row holding it, Enter or Esc ends it where it is; another key ends it and
 *  does what it does. Returns whether it took the key. */
function searchKey(ui: UiState, key: Key, ctx: KeyContext): boolean {
  const s = ui.search!;
  const at = ui.selected[ui.screen]!;
  if (key.kind === "char") return (s.text += key.ch), findRow(ui, ctx, at, true), true;
  if (key.kind !== "key") return (ui.search = null), false;
  if (key.name === "f3") return findRow(ui, ctx, at, false), true;
  if (key.name === "backspace" || key.name === "delete") return (s.text = s.text.slice(0, -1)), findRow(ui, ctx, at, true), true;
  ui.search = null;
  return key.name === "return" || key.name === "escape";
}

/** F3: a search over the screen's rows, where the screen lists them as text. */
function startSearch(ui: UiState, ctx: KeyContext): void {
  if (!SCREENS[ui.screen]!.rowTexts) return ctx.ctl.say("F3: search finds rows on the Overview, Tensors and Findings; / filters this screen");
  ui.search = { text: "", found: true };
}

/** `k` and F9: ask how to stop the process (the selected row's on the Overview). */
function askKill(ui: UiState, ctx: KeyContext): void {
  const t = killTarget(ui, ctx);
  if (typeof t === "string") return ctx.ctl.say(t);
  ui.prompt = { kind: "kill_signal", ...t };
  ctx.ctl.say(`stop ${t.label}: t SIGTERM (asks it to end), 9 SIGKILL (ends it at once), any other key cancels`);
}

/** htop's function keys as the keys they stand for here (F3, F9 and F10 are handled apart). */
const F_KEYS: Partial<Record<string, string>> = { f1: "?", f4: "/", f6: "s" };

function select(ui: UiState, ctx: KeyContext, to: (at: number) => number): void {
  const n = ctx.rows(ui);
  const at = ui.selected[ui.screen]!;
  ui.selected[ui.screen] = Math.max(0, Math.min(n - 1, to(at)));
  SCREENS[ui.screen]!.onSelect?.(ui);
}

/** The process `k` would stop: the selected row on the Overview, the shown process elsewhere. */
function killTarget(ui: UiState, ctx: KeyContext): { pid: number; label: string; command: string | null } | string {
  if (ui.screen === OVERVIEW) {
    const p = ctx.procs(ui)[ui.selected[OVERVIEW]!];
    if (!p) return "k: select a process first (↑ ↓)";
    // A row of the demo's recorded machine is a process of another machine, long gone.
    // (A replay's row is such a one too, whatever this machine runs under its pid.)
    if (p.recorded || !ctx.ctl.doc?.processes.some((q) => q.pid === p.pid && q.device === p.device)) return `k: pid ${p.pid} is a recording: there is no process to stop`;
    return { pid: p.pid, label: `${p.pid} ${p.name ?? p.command ?? ""}`.trim(), command: p.command };
  }
  const pm = ctx.pm(ui);
  if (!pm) return "k: no process selected (Overview: ↑ ↓, Enter)";
  if (pm.source === "replay") return `k: pid ${pm.pid} is a replay: there is no process to stop`;
  if (pm.ended) return `k: pid ${pm.pid} has exited`;
  const row = ctx.ctl.doc?.processes.find((p) => p.agent_pid === pm.pid);
  return { pid: row?.pid ?? pm.pid, label: `${row?.pid ?? pm.pid} ${row?.name ?? pm.title}`.trim(), command: row?.command ?? null };
}

/** A key while a question waits on the status line: it answers the question, nothing else. */
function answer(ui: UiState, key: Key, ctx: KeyContext): void {
  const p = ui.prompt!;
  const ch = key.kind === "char" ? key.ch : "";
  ui.prompt = null;
  if (p.kind === "empty_cache") {
    if (ch === "y" || ch === "Y") return void ctx.ctl.run(ctx.pm(ui), "empty_cache");
    return ctx.ctl.say("empty_cache cancelled");
  }
  if (p.kind === "attach") {
    if (ch === "y" || ch === "Y") return void ctx.ctl.attach(p.pid, p.label);
    return ctx.ctl.say(`pid ${p.pid} left without the agent`);
  }
  if (p.kind === "kill_signal") {
    const signal = ch === "t" || ch === "1" ? "SIGTERM" : ch === "9" || ch === "K" ? "SIGKILL" : null;
    if (!signal) return ctx.ctl.say(`pid ${p.pid} left running`);
    ui.prompt = { kind: "kill_confirm", pid: p.pid, label: p.label, signal, command: p.command };
    return ctx.ctl.say(`send ${signal} to ${p.label}? y / n`);
  }
  if (ch === "y" || ch === "Y") return ctx.ctl.kill(p.pid, p.signal, p.command);
  ctx.ctl.say(`pid ${p.pid} left running`);
}

export function handleKey(ui: UiState, input: Key, ctx: KeyContext): void {
  const { ctl } = ctx;
  if ((input.kind === "ctrl" && input.ch === "c") || (input.kind === "key" && input.name === "f10")) return ctx.exit();
  if (ui.search && !ui.typing && searchKey(ui, input, ctx)) return;
  const alias = input.kind === "key" ? F_KEYS[input.name] : undefined;
  const key: Key = alias ? { kind: "char", ch: alias } : input;
  if (ui.typing) {
    if (input.kind === "key" && input.name === "return") ui.typing = false;
    else if (input.kind === "key" && input.name === "escape") (ui.typing = false), (ui.filter = "");
    else if (input.kind === "key" && (input.name === "backspace" || input.name === "delete")) ui.filter = ui.filter.slice(0, -1);
    else if (input.kind === "char") ui.filter += input.ch;
    return;
  }
  if (key.kind === "mouse") return mouse(ui, key, ctx);
  if (key.kind === "other") return;
  if (ui.prompt) return answer(ui, key, ctx);
  const screen = ui.screen;
  if (SCREENS[screen]!.onKey?.(ui, key, ctx)) return;
  // F6 where no column sorts (the screen did not take its `s`).
  if (alias === "s") return ctl.say("F6: this screen has no columns to sort by");
  if (key.kind === "key") {
    switch (key.name) {
      case "escape":
        // A screen that opened something (a finding, a segment) closed it above.
        return back(ui, ctx);
      case "f3":
        return startSearch(ui, ctx);
      case "f9":
        return askKill(ui, ctx);
      case "tab":
        return void (ui.screen = (screen + 1) % SCREENS.length);
      case "backtab":
        return void (ui.screen = (screen + SCREENS.length - 1) % SCREENS.length);
      case "down":
        return select(ui, ctx, (a) => a + 1);
      case "up":
        return select(ui, ctx, (a) => a - 1);
      case "pagedown":
        return select(ui, ctx, (a) => a + 10);
      case "pageup":
        return select(ui, ctx, (a) => a - 10);
      case "home":
        return select(ui, ctx, () => 0);
      case "end":
        return select(ui, ctx, () => Infinity);
      default:
        return;
    }
  }
  if (key.kind !== "char") return;
  const ch = key.ch;
  const byKey = SCREENS.findIndex((s) => s.key === ch);
  if (byKey >= 0) return void (ui.screen = byKey);
  switch (ch) {
    case "q":
      return ctx.exit();
    case "?":
      // Help and back again, as in htop.
      if (screen === HELP) return void (ui.screen = ui.back ?? OVERVIEW);
      return void ((ui.back = screen), (ui.screen = HELP));
    case "j":
      return select(ui, ctx, (a) => a + 1);
    case "g":
      return select(ui, ctx, () => 0);
    case "G":
      return select(ui, ctx, () => Infinity);
    case "/":
      return void ((ui.typing = true), (ui.filter = ""));
    case " ":
    case "p":
      return ctl.setPaused(!ctl.paused);
    case "+":
      return ctl.stepInterval(1);
    case "-":
      return ctl.stepInterval(-1);
    case "k":
      return askKill(ui, ctx);
    case "D":
      return ctx.onDemo?.();
    case "[":
    case "]": {
      const said = ch === "[" ? earlier(ui, ctx.pm(ui)) : later(ui, ctx.pm(ui));
      return said ? ctl.say(said) : undefined;
    }
    case "P":
      return nextPeakView(ui);
    case "a": {
      // The selected process on the Overview, where no agent runs in it: start one (asks first).
      const p = screen === OVERVIEW ? ctx.procs(ui)[ui.selected[OVERVIEW]!] : undefined;
      if (!p) return ctl.say("a: select a process on the Overview first (↑ ↓)");
      if (p.agent_pid !== null) return ctl.say(`a: pid ${p.pid} already has the agent`);
      if (!ctl.doc?.processes.some((q) => q.pid === p.pid)) return ctl.say(`a: pid ${p.pid} is a recording: there is no process to attach to`);
      const label = `${p.pid} ${p.name ?? p.command ?? ""}`.trim();
      ui.prompt = { kind: "attach", pid: p.pid, label };
      return ctl.say(`attach the agent to ${label} (a PyTorch process started without it)? y / n`);
    }
  }
  // d, r, e: the selected row's process on the Overview, the shown process elsewhere.
  const row = ctx.procs(ui)[ui.selected[OVERVIEW]!];
  const models = ctl.processModels();
  const target = screen === OVERVIEW ? models.find((m) => m.pid === (row?.agent_pid ?? row?.pid)) : ctx.pm(ui);
  if (ch === "d") return void ctl.run(target, "dump_snapshot");
  if (ch === "r") return void ctl.run(target, "reset_peaks");
  if (ch === "e") {
    if (!target?.socket) return void ctl.run(target, "empty_cache"); // says why not
    ui.pid = target.pid;
    ui.prompt = { kind: "empty_cache", pid: target.pid };
    return ctl.say(`empty the cache of pid ${target.pid}? y / n`);
  }
}

/** Wheel scrolls the selection; a click selects the row under it, switches tabs, or sorts by a column. */
function mouse(ui: UiState, m: Extract<Key, { kind: "mouse" }>, ctx: KeyContext): void {
  if (!m.press) return;
  if (m.button === 64) return select(ui, ctx, (a) => a - 3);
  if (m.button === 65) return select(ui, ctx, (a) => a + 3);
  if (m.button !== 0) return;
  if (m.y === 1) {
    const s = ctx.tabAt(ui, m.x);
    if (s !== null) ui.screen = s;
    return;
  }
  const line = m.y - BODY_TOP;
  const spec = SCREENS[ui.screen]!;
  const sort = ctx.sortAt(ui, line, m.x);
  if (sort) return spec.sortBy?.(ui, sort);
  const row = ctx.rowAt(ui, line);
  if (row === null) return;
  if (ui.selected[ui.screen] === row && spec.onClickSelected?.(ui, row)) return;
  select(ui, ctx, () => row);
}
