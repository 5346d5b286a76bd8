// The monitor's frame: a header of tabs, one screen, and the status lines. Input is read as a
// stream of keys (src/tui/keys.ts) and each key is handled in order (src/tui/keymap.ts).
import { Box, Text, useApp, useStdin, useWindowSize } from "ink";
import { useEffect, useRef, useState } from "react";
import type { Controller } from "./controller";
import { color, cut, messageLines, pad, textWidth } from "./format";
import { KeyReader, type Key } from "./keys";
import { BODY_TOP, handleKey, openScreen, type KeyContext } from "./keymap";
import { rowAlert } from "./controller";
import { barPlace, F_BAR_WIDTH, FunctionBar } from "./footer";
import { keyHint, SCREENS, screenIndex, type ScreenId, type ScreenProps } from "./registry";
import { overviewProcesses } from "./screens/overview";
import { gpuStatusWords } from "./screens/held-memory";
import { pastMark } from "./moment";
import { snapshotHeader } from "./snapshot-header";
import { newUiState, type UiState } from "./ui-state";
import { expand, type Drawn } from "./drawn";

/** How long a message stays on the status line before the key hint comes back (a question
 *  waiting for its answer stays). */
export const MESSAGE_MS = 6000;

/**
 * A message in one line of `width`: the footer never takes a line from the screen above it. Where
 * it is too long, a path in it (a line of its own, from "/") is kept whole, after the sentence cut
 * (or alone where the sentence would keep too little); only a path wider than the line is cut, at its start.
 */
export function statusLine(text: string, width: number): string {
  const parts = text.split("\n");
  const joined = parts.join("  ");
  if (textWidth(joined) <= width) return joined;
  const path = parts.find((p) => p.startsWith("/"));
  if (!path) return pad(joined, width);
  const room = width - textWidth(path) - 2;
  if (room >= 12) return `${pad(parts[0]!, room)}  ${path}`;
  if (textWidth(path) <= width) return path;
  const tail = [...path].reverse().join("");
  return `…${[...cut(tail, width - 1)].reverse().join("")}`;
}

/** A screen made for drawing (drawn.ts), and the frame it was made for. */
interface Made extends Drawn {
  screen: number;
  width: number;
  height: number;
}

export interface AppProps {
  ctl: Controller;
  ascii: boolean;
  initialScreen?: ScreenId;
  /** Start the demo replay (D); absent where there is none to offer. */
  onDemo?: () => void;
  /** Fixed size, for tests; otherwise the terminal's. */
  size?: { columns: number; rows: number };
}

/** The tab line's text: every tab named where it fits; on a narrow terminal only the current one. */
function tabLine(screen: number, room: number): { text: string; spans: [number, number][] } {
  const build = (named: boolean) => {
    const spans: [number, number][] = [];
    let text = "";
    SCREENS.forEach((s, i) => {
      const t = i === screen ? `[${s.key} ${s.title}]` : named ? ` ${s.key} ${s.title} ` : ` ${s.key} `;
      spans.push([text.length, text.length + t.length]);
      text += t;
    });
    return { text, spans };
  };
  const named = build(true);
  return named.text.length <= room ? named : build(false);
}

const TAB_START = "gpumem-tui ".length;

export function App({ ctl, ascii, initialScreen = "overview", onDemo, size }: AppProps) {
  const { exit } = useApp();
  const win = useWindowSize();
  const columns = size?.columns ?? win.columns ?? 80;
  const rows = size?.rows ?? win.rows ?? 24;
  const [, setVersion] = useState(0);
  // What the frame last drew (drawn.ts: null where the screen could not be read so), and the screen
  // a tick made for the next drawing.
  const last = useRef<{ key: string | null; next: Made | null }>({ key: null, next: null });
  const redraw = () => {
    last.current.next = null;
    setVersion((v) => v + 1);
  };
  // The user's choices, changed key by key (several keys in one read each see the one before).
  const ui = useRef<UiState>(newUiState(screenIndex(initialScreen), SCREENS.length)).current;
  // A tick draws only where the screen, or the frame's own words on the tick's state, changed: an
  // idle machine's Overview is not laid out and written again each interval.
  const tickMade = useRef<() => Made | null>(() => null);
  useEffect(
    () =>
      ctl.subscribe((why) => {
        if (why !== "tick") return redraw();
        const made = tickMade.current();
        if (made && made.key === last.current.key) return;
        last.current.next = made;
        setVersion((v) => v + 1);
      }),
    [ctl],
  );

  // The header's corner: the past shown, else how many findings ask for attention (and how many
  // processes show their ring headers' figures only, where many run: Controller.follow), else the size.
  const alerts = ctl.state.alertCount;
  const unread = ctl.state.unread;
  const counts = [alerts ? `${alerts} finding${alerts === 1 ? "" : "s"}` : "", unread ? `${unread} on headers` : ""].filter(Boolean).join(", ");
  const corner = ui.when !== null && pastMark(ui, SCREENS[ui.screen]!.id) ? `PAST ${ui.when}` : counts || `${columns}x${rows}`;
  const tabRoom = Math.max(10, columns - 13 - Math.max(9, corner.length));
  // A message shows for MESSAGE_MS, then the key hint again; a question stays until answered.
  const age = Date.now() - ctl.statusAt;
  const message = ctl.status && (ui.prompt || age < MESSAGE_MS) ? ctl.status : "";
  useEffect(() => {
    if (!message || ui.prompt) return;
    const t = setTimeout(redraw, MESSAGE_MS - age + 10);
    return () => clearTimeout(t);
  }, [message, ctl.statusAt]);
  // A snapshot is read once: there is no interval to tell.
  const snapshot = ctl.replay?.snapshot ?? null;
  // On the Overview, the selected row's finding, where it has one (what its mark stands for); else
  // its GPU's finding (memory held by a gone pid: screens/held-memory), said the same way. Of the
  // store's state now: a tick's comparison (make) reads it too.
  const rowWords = () => {
    const row = ui.screen === screenIndex("overview") ? overviewProcesses(ctl.state.doc, ui.procSort, ui.filter, ui.procReverse)[ui.selected[ui.screen]!] : undefined;
    const found = row ? rowAlert(ctl.state, row) : null;
    return { row, found, gpu: ui.screen === screenIndex("overview") && !found ? gpuStatusWords(ctl.state.doc, row?.device ?? null) : "" };
  };
  const { found: alert, gpu: gpuWords } = rowWords();
  const alertTitle = alert ? `! ${alert.severity}: ${alert.title}` : gpuWords;
  const alertText = alert && textWidth(`${alertTitle}  Enter: its process`) <= columns - 1 ? `${alertTitle}  Enter: its process` : alertTitle;
  const searchText = ui.search ? `search: ${ui.search.text}▏${ui.search.found ? "" : " (no row holds it)"}  (F3 next, Enter or Esc ends)` : "";
  const alertShown = !ui.typing && !searchText && !message && !pastMark(ui, SCREENS[ui.screen]!.id) && (alert !== null || gpuWords !== "");
  const said = ui.typing ? `filter: ${ui.filter}▏ (Enter keeps, Esc clears)` : searchText || message || pastMark(ui, SCREENS[ui.screen]!.id) || alertText;
  const mark = ctl.paused ? "PAUSED " : "";
  // Nothing said: htop's function keys and the interval where the width holds them, else the keys in words.
  const interval = snapshot ? "" : `every ${ctl.intervalMs} ms  `;
  // Idle, the bar leads and the interval follows where there is room for it (the bar alone at 60 columns).
  const idle = [`${interval}? help`, ""].find((t) => barPlace(`${mark}${t}`, columns - 1, "idle"));
  const place = said ? barPlace(`${mark}${said}`, columns - 1, alertShown ? "beside" : "alone") : idle !== undefined ? "first" : null;
  const statusText = said || (idle ?? `${interval}? help  Esc back  q quit`);
  const past = pastMark(ui, SCREENS[ui.screen]!.id);
  // The bar's last label ends in a space: one more parts it from the text.
  const textRoom = columns - 1 - (place ? F_BAR_WIDTH + 1 : 0);
  const status = statusLine(`${mark}${statusText}`, textRoom);
  // A message naming a path (the run's log, d's snapshot) that does not fit one line: its sentence,
  // then the path in full on lines of its own, wrapped where wider than the terminal; the screen
  // above gives up those lines (a log cut at its start cannot be found).
  const pathMessage = said === message && /\n\//.test(message) ? messageLines(`${mark}${message}`, columns - 1) : [];
  const messageRows = pathMessage.length > 1 ? pathMessage : null;
  // The frame stays one line shorter than the terminal: a full-height frame makes Ink redraw the
  // whole screen (the flicker full-screen Ink apps are known for). The tab line, the screen, one
  // status line; a snapshot's header under the tabs.
  const head = snapshot ? 1 : 0;
  const body = Math.max(3, rows - 3 - head - (messageRows ? messageRows.length - 1 : 0));

  // One state for every screen, and for the keys: the last tick's (the store's).
  const pmOf = (u: UiState) => ctl.state.processes.find((m) => m.pid === u.pid) ?? ctl.state.processes[0];
  // The process the per-process screens show is the one whose ring a tick reads where many run.
  ctl.focus = pmOf(ui)?.pid ?? null;
  const props = (u: UiState): ScreenProps => ({ ctl, state: ctl.state, pm: pmOf(u), ui: u, selected: u.selected[u.screen]!, width: columns, height: body, ascii, keyHint, screens: SCREENS });
  const ctx: KeyContext = {
    ctl,
    exit,
    onDemo,
    procs: (u) => overviewProcesses(ctl.state.doc, u.procSort, u.filter, u.procReverse),
    pm: pmOf,
    rows: (u) => SCREENS[u.screen]!.rows?.(props(u)) ?? 0,
    // A click's line is counted from BODY_TOP: the snapshot's header line is not the screen's.
    rowAt: (u, line) => (line < head ? null : (SCREENS[u.screen]!.rowAt?.(props(u), line - head) ?? null)),
    sortAt: (u, line, x) => (line < head ? null : (SCREENS[u.screen]!.sortAt?.(props(u), line - head, x) ?? null)),
    sorts: (u) => SCREENS[u.screen]!.sorts?.(props(u)) ?? [],
    rowTexts: (u) => SCREENS[u.screen]!.rowTexts?.(props(u)) ?? [],
    show: (u, id) => {
      const i = SCREENS.findIndex((s) => s.id === id);
      if (i >= 0) openScreen(u, i);
    },
    tabAt: (u, x) => {
      const k = tabLine(u.screen, tabRoom).spans.findIndex(([a, b]) => x - 1 - TAB_START >= a && x - 1 - TAB_START < b);
      return k >= 0 ? k : null;
    },
  };
  const ctxRef = useRef(ctx);
  ctxRef.current = ctx;
  const Current = SCREENS[ui.screen]!.component;
  /** The current screen made now (drawn.ts), with what the frame says beside it of the tick's state. */
  const make = (): Made | null => {
    try {
      const st = ctl.state;
      const w = rowWords();
      const words = [st.alertCount, st.unread, [...st.alerts].map(([pid, f]) => [pid, f.severity, f.title]), w.found?.severity ?? null, w.found?.title ?? null, w.gpu, ctl.paused, ctl.intervalMs, ctl.status, ctl.statusAt, ctl.replay?.title ?? null];
      const made = expand(<Current {...props(ui)} />);
      return { ...made, key: `${JSON.stringify(words)}${made.key}`, screen: ui.screen, width: columns, height: body };
    } catch {
      return null; // a screen that cannot be read outside React: React draws it, every tick
    }
  };
  tickMade.current = make;
  const next = last.current.next;
  last.current.next = null;
  const made = next && next.screen === ui.screen && next.width === columns && next.height === body ? next : make();
  last.current.key = made?.key ?? null;

  // Every read, as it was read: Ink's own input events reshape it (a mouse report is dropped, a
  // burst of keys is one event), so the reads are taken where Ink takes them, from stdin.read,
  // and split into keys here. Raw mode is still asked of Ink, which then reads the terminal.
  const { stdin, setRawMode } = useStdin();
  useEffect(() => {
    setRawMode(true);
    const reader = new KeyReader();
    let flushTimer: ReturnType<typeof setTimeout> | null = null;
    const feed = (keys: Key[]) => {
      for (const key of keys) handleKey(ui, key, ctxRef.current);
      redraw();
    };
    const read = stdin.read;
    stdin.read = function (this: typeof stdin, ...args: Parameters<typeof read>) {
      const chunk = read.apply(this, args) as string | Buffer | null;
      if (chunk !== null) {
        if (flushTimer) clearTimeout(flushTimer);
        feed(reader.push(String(chunk)));
        if (reader.waiting) flushTimer = setTimeout(() => feed(reader.flush()), 50);
      }
      return chunk;
    } as typeof read;
    return () => {
      stdin.read = read;
      if (flushTimer) clearTimeout(flushTimer);
      setRawMode(false);
    };
  }, [stdin, setRawMode]);

  const tabs = tabLine(ui.screen, tabRoom).text;
  return (
    <Box flexDirection="column" width={columns} height={rows - 1}>
      <Text>
        <Text bold color={color("cyan")}>gpumem-tui</Text> {pad(tabs, tabRoom)} {past || (unread && !alerts) ? <Text bold color={color("yellow")}>{corner}</Text> : alerts ? <Text bold color={color([...ctl.state.alerts.values()].some((f) => f.severity === "error") ? "red" : "yellow")}>{corner}</Text> : <Text dimColor>{corner}</Text>}
      </Text>
      {snapshot ? <Text bold wrap="truncate-end">{snapshotHeader(snapshot, columns - 1)}</Text> : null}
      <Box flexDirection="column" height={body} overflow="hidden">
        {/* Screens budget their own lines; if one ever runs over, its last lines are cut (never
            shrink: Yoga would squeeze lines anywhere in the screen to nothing). */}
        <Box flexDirection="column" flexShrink={0}>
          {made ? made.node : <Current {...props(ui)} />}
        </Box>
      </Box>
      {messageRows ? (
        messageRows.map((l, i) => (
          <Text key={i} inverse>
            {pad(l, columns - 1)}
          </Text>
        ))
      ) : (
      <Text>
        {place === "first" ? <><FunctionBar /> </> : null}
        <Text inverse={!!message || ctl.paused} color={alertShown ? color(alert?.severity === "error" ? "red" : "yellow") : undefined}>
          {mark ? <Text bold color={color("yellow")}>{mark}</Text> : null}
          {pad(status.slice(mark.length), textRoom - mark.length)}
        </Text>
        {place === "after" ? <> <FunctionBar /></> : null}
      </Text>
      )}
    </Box>
  );
}

export { BODY_TOP };
