// The monitor's frame: a header, one screen, and a status line; every key is handled here.
import { Box, type Key, Text, useApp, useInput, useWindowSize } from "ink";
import { useEffect, useRef, useState } from "react";
import type { Controller } from "./controller";
import { color, pad } from "./format";
import { HelpScreen } from "./screens/help";
import { LinesScreen } from "./screens/lines";
import { Overview, overviewProcesses, PROCESS_SORTS, type ProcessSort } from "./screens/overview";
import { ProcessScreen } from "./screens/process";
import { SegmentsScreen, segmentsInOrder } from "./screens/segments";
import { SegmentView } from "./screens/segment-view";
import { TENSOR_SORTS, TensorsScreen, type TensorSort } from "./screens/tensors";

export const SCREENS = ["Overview", "Process", "Tensors", "Segments", "Lines", "Help"] as const;
const HELP = SCREENS.indexOf("Help");
const LINES = SCREENS.indexOf("Lines");

export interface AppProps {
  ctl: Controller;
  ascii: boolean;
  initialScreen?: number;
  /** Start the demo replay (D); absent where there is none to offer. */
  onDemo?: () => void;
  /** Fixed size, for tests; otherwise the terminal's. */
  size?: { columns: number; rows: number };
}

/** The parts of Ink's key that the handler reads. */
type KeyLike = Pick<Key, "return" | "escape" | "backspace" | "delete" | "ctrl" | "meta" | "tab" | "shift" | "downArrow" | "upArrow" | "pageDown" | "pageUp">;
const NO_KEY: KeyLike = { return: false, escape: false, backspace: false, delete: false, ctrl: false, meta: false, tab: false, shift: false, downArrow: false, upArrow: false, pageDown: false, pageUp: false };

export function App({ ctl, ascii, initialScreen = 0, onDemo, size }: AppProps) {
  const { exit } = useApp();
  const win = useWindowSize();
  const columns = size?.columns ?? win.columns ?? 80;
  const rows = size?.rows ?? win.rows ?? 24;
  const [, setVersion] = useState(0);
  const [screen, setScreenState] = useState(initialScreen);
  // The screen as the keys of one read have left it: a paste or a burst over SSH arrives as one
  // input string, split below into keys that each see the screen the key before chose.
  const screenNow = useRef(initialScreen);
  const setScreen = (n: number | ((s: number) => number)) => {
    screenNow.current = typeof n === "function" ? n(screenNow.current) : n;
    setScreenState(screenNow.current);
  };
  const [selected, setSelectedState] = useState(SCREENS.map(() => 0));
  const selectedNow = useRef(selected);
  const [pid, setPid] = useState<number | null>(null);
  const [procSort, setProcSort] = useState<ProcessSort>("memory");
  const [tensorSort, setTensorSort] = useState<TensorSort>("size");
  const [filter, setFilter] = useState("");
  const [typing, setTyping] = useState(false);
  const [confirm, setConfirm] = useState(false);
  // The segment opened on the Segments screen (its address), and the list's selection to go back to.
  const [segment, setSegment] = useState<{ address: number; listSelected: number } | null>(null);
  useEffect(() => ctl.subscribe(() => setVersion(ctl.version)), [ctl]);

  const models = ctl.processModels();
  const pm = models.find((m) => m.pid === pid) ?? models[0];
  // In the order the Overview shows them: a job's ranks together, in rank order.
  const overview = ctl.overview();
  const procs = overviewProcesses(overview.doc, procSort, filter);
  // The Lines screen asks the selected process's agent for its line profile (at most every 2 s,
  // off the key path); the answer arrives through the controller's notify.
  useEffect(() => {
    if (screen === LINES) void ctl.refreshLines(pm);
  });
  const move = (delta: number) => {
    const at = screenNow.current;
    selectedNow.current = selectedNow.current.map((v, i) => (i === at ? Math.max(0, v + delta) : v));
    setSelectedState(selectedNow.current);
  };

  useInput((input, key) => {
    // Several plain keys in one read (a paste, key repeat over SSH, tmux send-keys in a burst):
    // each counts, in order. Typing a filter takes the text whole.
    if (!typing && input.length > 1 && !key.ctrl && !key.meta && /^[\x20-\x7e\r\t]+$/.test(input)) {
      for (let i = 0; i < input.length; i++) {
        const ch = input[i]!;
        if (ch === "/") {
          setTyping(true);
          return setFilter(input.slice(i + 1)); // what follows a "/" is the filter's text
        }
        if (ch === "\r") onKey("", { ...NO_KEY, return: true });
        else if (ch === "\t") onKey("", { ...NO_KEY, tab: true });
        else onKey(ch, NO_KEY);
      }
      return;
    }
    onKey(input, key);
  });

  function onKey(input: string, key: KeyLike): void {
    const screen = screenNow.current;
    if (typing) {
      if (key.return) setTyping(false);
      else if (key.escape) (setTyping(false), setFilter(""));
      else if (key.backspace || key.delete) setFilter((f) => f.slice(0, -1));
      else if (input && !key.ctrl && !key.meta) setFilter((f) => f + input);
      return;
    }
    if (confirm) {
      setConfirm(false);
      if (input === "y" || input === "Y") void ctl.run(pm, "empty_cache");
      else ctl.say("empty_cache cancelled");
      return;
    }
    if (input === "q" || (key.ctrl && input === "c")) return exit();
    if (key.tab) return setScreen((s) => (s + (key.shift ? SCREENS.length - 1 : 1)) % SCREENS.length);
    if (/^[1-9]$/.test(input) && Number(input) <= SCREENS.length) return setScreen(Number(input) - 1);
    if (input === "?") return setScreen(HELP);
    if (key.downArrow || input === "j") return move(1);
    if (key.upArrow || input === "k") return move(-1);
    if (key.pageDown) return move(10);
    if (key.pageUp) return move(-10);
    if (key.return && screen === 3 && !segment) {
      const seg = segmentsInOrder(pm)[selectedNow.current[3]!];
      if (!seg) return;
      setSegment({ address: seg.address, listSelected: selectedNow.current[3]! });
      return move(-selectedNow.current[3]!); // the block list starts at its top
    }
    if ((key.escape || key.backspace) && screen === 3 && segment) {
      move(segment.listSelected - selectedNow.current[3]!);
      return setSegment(null);
    }
    if (key.return && screen === 0) {
      const p = procs[selectedNow.current[0]!];
      if (p) setPid(p.agent_pid ?? p.pid);
      return setScreen(1);
    }
    if (input === "s") {
      if (screen === 0) setProcSort((s) => PROCESS_SORTS[(PROCESS_SORTS.indexOf(s) + 1) % PROCESS_SORTS.length]!);
      else if (screen === 2) setTensorSort((s) => TENSOR_SORTS[(TENSOR_SORTS.indexOf(s) + 1) % TENSOR_SORTS.length]!);
      return;
    }
    if (input === "/") return (setTyping(true), setFilter(""));
    if (input === " " || input === "p") {
      ctl.paused = !ctl.paused;
      return ctl.say(ctl.paused ? "paused (space to resume)" : "resumed");
    }
    if (input === "+") return ctl.setInterval(ctl.intervalMs * 2);
    if (input === "-") return ctl.setInterval(ctl.intervalMs / 2);
    const row = procs[selectedNow.current[0]!];
    const target = screen === 0 ? models.find((m) => m.pid === (row?.agent_pid ?? row?.pid)) : pm;
    if (input === "d") return void ctl.run(target, "dump_snapshot");
    if (input === "r") return void ctl.run(target, "reset_peaks");
    if (input === "e") {
      if (!target?.socket) return void ctl.run(target, "empty_cache"); // says why not
      if (target.pid !== pm?.pid) setPid(target.pid);
      setConfirm(true);
      return ctl.say(`empty the cache of pid ${target.pid}? y / n`);
    }
    if (input === "D" && onDemo) return onDemo();
  }

  // The frame stays one line shorter than the terminal: a full-height frame makes Ink redraw the
  // whole screen (the flicker full-screen Ink apps are known for).
  const body = rows - 3;
  // Every tab named where they fit; on a narrow terminal only the current one is (80 columns).
  const tabRoom = Math.max(10, columns - 22);
  const named = SCREENS.map((s, i) => (i === screen ? `[${i + 1} ${s}]` : ` ${i + 1} ${s} `)).join("");
  const tabs = named.length <= tabRoom ? named : SCREENS.map((s, i) => (i === screen ? `[${i + 1} ${s}]` : ` ${i + 1} `)).join("");
  const status = typing ? `filter: ${filter}▏ (Enter keeps, Esc clears)` : ctl.status || `${ctl.paused ? "PAUSED  " : ""}every ${ctl.intervalMs} ms  ? help  q quit`;
  return (
    <Box flexDirection="column" width={columns} height={rows - 1}>
      <Text>
        <Text bold color={color("cyan")}>gpumem-tui</Text> {pad(tabs, tabRoom)} <Text dimColor>{columns}x{rows}</Text>
      </Text>
      <Box flexDirection="column" height={body} overflow="hidden">
        {/* Screens budget their own lines; if one ever runs over, its last lines are cut (never
            shrink: Yoga would squeeze lines anywhere in the screen to nothing). */}
        <Box flexDirection="column" flexShrink={0}>
        {screen === 0 ? <Overview doc={overview.doc} history={overview.history} width={columns} height={body} selected={selected[0]!} sort={procSort} filter={filter} ascii={ascii} replay={ctl.replay ? `The ${ctl.replay.title}` : null} sampling={ctl.collector !== null} /> : null}
        {screen === 1 ? <ProcessScreen pm={pm} width={columns} height={body} ascii={ascii} /> : null}
        {screen === 2 ? <TensorsScreen pm={pm} width={columns} height={body} sort={tensorSort} filter={filter} selected={selected[2]!} /> : null}
        {screen === 3 && segment && pm ? <SegmentView pm={pm} address={segment.address} width={columns} height={body} ascii={ascii} selected={selected[3]!} /> : null}
        {screen === 3 && !(segment && pm) ? <SegmentsScreen pm={pm} width={columns} height={body} ascii={ascii} selected={selected[3]!} /> : null}
        {screen === LINES ? <LinesScreen pm={pm} state={pm ? ctl.lines.get(pm.pid) : undefined} width={columns} height={body} /> : null}
        {screen === HELP ? <HelpScreen /> : null}
        </Box>
      </Box>
      <Text inverse={!!ctl.status}>{pad(status, columns - 1)}</Text>
    </Box>
  );
}
