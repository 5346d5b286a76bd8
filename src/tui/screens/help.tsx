// Help: every key, one key away, scrolled with the keys that move a selection; how to scroll it,
// close it and quit stays on its last line whatever the terminal's size.
import { Box, Text } from "ink";
import { pad, textWidth, wrap } from "../format";
import { isChar, type ScreenProps, type ScreenSpec } from "../screen-spec";

/** Every key but the screens' own (their keys come from the list of screens). */
export const KEYS: [string, string][] = [
  ["↑ ↓  j", "move the selection (Page Up / Down by ten); on this help, scroll (k too: elsewhere k stops a process)"],
  ["Home End  g G", "first / last row"],
  ["mouse", "click selects a row, a tab or a column to sort by (again: reversed); the wheel scrolls"],
  ["Enter", "open what is selected: a process, a finding, a segment's blocks, a group of equal tensors, a block of the Timeline, a tensor's stack (where stacks were recorded)"],
  ["[ ]", "an earlier / a later finished step: Process shows its table, Tensors and Segments what was alive at its end, the Timeline its bands (PAST in the corner); after the newest, now"],
  ["← →", "on the Timeline: an earlier / a later step, as [ ]"],
  ["P", "on Tensors and Segments: the blocks alive at the running step's peak, then at the run's peak, then now; at a past step, its peak or its end"],
  ["Esc", "back: close what Enter opened, clear a kept filter, from the past to now, then to the screen Enter was pressed on, else to the Overview (from Help: where ? was pressed)"],
  ["s  I  F6", "sort by the next column shown (F6 too); reverse the sort (or click the column again)"],
  ["w", "on Tensors: group the blocks by the line of your code that allocated them, and back (where stacks were recorded)"],
  ["/  F4", "filter (type, Enter to keep, Esc to clear): every figure of the screen counts what it keeps"],
  ["F3", "search: the selection goes to the first row holding what is typed (Overview, Tensors, Findings); F3 again: the next; Enter or Esc ends it"],
  ["space  p", "pause / resume: nothing is read, replays stand still"],
  ["+ -", "sampling interval, a step along 250, 500, 1000, 2000, 5000 ms"],
  ["d", "snapshot of the selected process for pytorch.org/memory_viz (into the current directory, or --dump-dir)"],
  ["e", "empty the selected process's cache (asks first)"],
  ["r", "reset the selected process's peaks"],
  ["a", "attach the agent to the selected PyTorch process started without it (asks first; gpumem-tui attach)"],
  ["k  F9", "stop the selected process: t SIGTERM or 9 SIGKILL, then y (your own processes only)"],
  ["D", "the demo: a training run recorded on a GPU, replayed at its pace"],
  ["?  F1", "this help, and back"],
  ["q  F10  Ctrl-C", "quit"],
];

const KEY_WIDTH = 16;

/** The help's lines at `width`: a description too long for its line goes on under itself. */
export function helpLines(screens: readonly { key: string; title: string }[], width: number): { key: string; text: string }[] {
  const keys: [string, string][] = [[`1 … ${screens.length}, Tab`, `screens: ${screens.map((s) => `${s.key} ${s.title}`).join(", ")}`], ...KEYS];
  const room = Math.max(10, width - 1 - 2 - KEY_WIDTH - 1);
  const out: { key: string; text: string }[] = [];
  for (const [k, v] of keys) wrap(v, room).forEach((l, i) => out.push({ key: i === 0 ? k : "", text: l }));
  for (const l of wrap("On the Overview, `!` leads the row of a process (or job) with a finding: yellow a warning, red an error; selected, its title is on the status line; the header counts them all.", room)) out.push({ key: "", text: l });
  for (const l of wrap("Numbers come from NVML for every process, and from the gpumem agent inside PyTorch processes (gpumem-tui run -- python train.py).", room)) out.push({ key: "", text: l });
  return out;
}

/** Lines of the help's body: all but its title and its last line. */
const bodyRoom = (height: number) => Math.max(1, height - 2);

/** Where the help may start (the selection is its first line shown): one place per line hidden. */
function helpRows(p: ScreenProps): number {
  return Math.max(1, helpLines(p.screens, p.width).length - bodyRoom(p.height) + 1);
}

export function HelpScreen({ screens, width, height, top }: { screens: readonly { key: string; title: string }[]; width: number; height: number; top: number }) {
  const lines = helpLines(screens, width);
  const room = bodyRoom(height);
  const first = Math.max(0, Math.min(top, lines.length - room));
  const shown = lines.slice(first, first + room);
  const more = lines.length > room ? `  lines ${first + 1}-${first + shown.length} of ${lines.length}` : "";
  const hint = `j k ↑ ↓ PgUp PgDn scroll  ? Esc close  q quit${more}`;
  return (
    <Box flexDirection="column" height={height}>
      <Text bold>gpumem-tui keys</Text>
      <Box flexDirection="column" height={room}>
        {shown.map((l, i) => (
          <Text key={i}>
            {"  "}
            <Text bold>{pad(l.key, KEY_WIDTH)}</Text> {l.text}
          </Text>
        ))}
      </Box>
      <Text inverse>{pad(textWidth(hint) <= width - 1 ? hint : "j k scroll  ? close  q quit", width - 1)}</Text>
    </Box>
  );
}

export const helpScreen = {
  id: "help",
  key: "7",
  title: "Help",
  component: (p) => <HelpScreen screens={p.screens} width={p.width} height={p.height} top={p.selected} />,
  rows: helpRows,
  // `k` scrolls here (elsewhere it stops a process); j, the arrows and the pages are the selection's.
  onKey: (ui, key, ctx) => {
    if (!isChar(key, "k")) return false;
    ui.selected[ui.screen] = Math.max(0, ui.selected[ui.screen]! - 1);
    return true;
  },
} as const satisfies ScreenSpec;
