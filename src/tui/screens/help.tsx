// Help: every key, one key away.
import { Box, Text } from "ink";
import type { ScreenSpec } from "../screen-spec";

/** Every key but the screens' own (their keys come from the list of screens). */
export const KEYS: [string, string][] = [
  ["↑ ↓  j", "move the selection (Page Up / Down by ten)"],
  ["Home End  g G", "first / last row"],
  ["mouse", "click selects a row, a tab or a column to sort by; the wheel scrolls"],
  ["Enter", "open what is selected: a process, a finding, a segment's blocks (Esc back)"],
  ["s  I", "next sort column; reverse the sort (or click the column again)"],
  ["/", "filter (type, Enter to keep, Esc to clear)"],
  ["space  p", "pause / resume: nothing is read, replays stand still"],
  ["+ -", "sampling interval"],
  ["d", "snapshot of the selected process for pytorch.org/memory_viz (into the current directory, or --dump-dir)"],
  ["e", "empty the selected process's cache (asks first)"],
  ["r", "reset the selected process's peaks"],
  ["a", "attach the agent to the selected PyTorch process started without it (asks first; gpumem-tui attach)"],
  ["k", "stop the selected process: t SIGTERM or 9 SIGKILL, then y (your own processes only)"],
  ["D", "the demo: a training run recorded on a GPU, replayed at its pace"],
  ["?", "this help"],
  ["q  Ctrl-C", "quit"],
];

export function HelpScreen({ screens }: { screens: readonly { key: string; title: string }[] }) {
  const keys: [string, string][] = [[`1 … ${screens.length}, Tab`, `screens: ${screens.map((s) => s.title).join(", ")}`], ...KEYS];
  return (
    <Box flexDirection="column">
      <Text bold>gpumem-tui keys</Text>
      {keys.map(([k, v]) => (
        <Text key={k}>
          {"  "}
          <Text bold>{k.padEnd(14)}</Text> {v}
        </Text>
      ))}
      <Text dimColor>Numbers come from NVML for every process, and from the gpumem agent inside PyTorch processes (gpumem-tui run -- python train.py).</Text>
    </Box>
  );
}

export const helpScreen = {
  id: "help",
  key: "7",
  title: "Help",
  component: (p) => <HelpScreen screens={p.screens} />,
} as const satisfies ScreenSpec;
