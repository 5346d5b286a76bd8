// What each key does: one key at a time against the user's choices (UiState), so that the keys of
// one read count once each, in order. The current screen is asked first (its own keys: Enter, Esc,
// s, I… in its file, src/tui/screens/*); the keys every screen shares are here. Commands go
// through the controller; nothing here draws.
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
    if (!ctx.ctl.doc?.processes.some((q) => q.pid === p.pid && q.device === p.device)) return `k: pid ${p.pid} is a recording: there is no process to stop`;
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

export function handleKey(ui: UiState, key: Key, ctx: KeyContext): void {
  const { ctl } = ctx;
  if ((key.kind === "ctrl" && key.ch === "c") || (key.kind === "key" && key.name === "f10")) return ctx.exit();
  if (ui.typing) {
    if (key.kind === "key" && key.name === "return") ui.typing = false;
    else if (key.kind === "key" && key.name === "escape") (ui.typing = false), (ui.filter = "");
    else if (key.kind === "key" && (key.name === "backspace" || key.name === "delete")) ui.filter = ui.filter.slice(0, -1);
    else if (key.kind === "char") ui.filter += key.ch;
    return;
  }
  if (key.kind === "mouse") return mouse(ui, key, ctx);
  if (key.kind === "other") return;
  if (ui.prompt) return answer(ui, key, ctx);
  const screen = ui.screen;
  if (SCREENS[screen]!.onKey?.(ui, key, ctx)) return;
  if (key.kind === "key") {
    switch (key.name) {
      case "escape":
        // Back: from the past to now first; from Help to the screen it was opened on, from any
        // other screen to the Overview (a screen that opened something, a finding or a segment,
        // closed it above).
        if (ui.when !== null && screen !== HELP) return void (ui.when = null);
        return void (ui.screen = screen === HELP ? (ui.back ?? OVERVIEW) : OVERVIEW);
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
      return ctl.setInterval(ctl.intervalMs * 2);
    case "-":
      return ctl.setInterval(ctl.intervalMs / 2);
    case "k": {
      const t = killTarget(ui, ctx);
      if (typeof t === "string") return ctl.say(t);
      ui.prompt = { kind: "kill_signal", ...t };
      return ctl.say(`stop ${t.label}: t SIGTERM (asks it to end), 9 SIGKILL (ends it at once), any other key cancels`);
    }
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
