// Help: every key, one key away.
import { Box, Text } from "ink";

export const KEYS: [string, string][] = [
  ["1 … 6, Tab", "screens: Overview, Process, Tensors, Segments, Lines, Help"],
  ["↑ ↓  j k", "move the selection"],
  ["Enter", "open the selected process; on Segments, the selected segment's blocks (Esc: back)"],
  ["s", "change the sort order"],
  ["/", "filter (type, Enter to keep, Esc to clear)"],
  ["space  p", "pause / resume sampling"],
  ["+ -", "sampling interval"],
  ["d", "snapshot of the selected process, for pytorch.org/memory_viz"],
  ["e", "empty the selected process's cache (asks first)"],
  ["r", "reset the selected process's peaks"],
  ["D", "the demo: a training run recorded on a GPU, replayed at its pace"],
  ["?", "this help"],
  ["q  Ctrl-C", "quit"],
];

export function HelpScreen() {
  return (
    <Box flexDirection="column">
      <Text bold>gpumem-tui keys</Text>
      {KEYS.map(([k, v]) => (
        <Text key={k}>
          {"  "}
          <Text bold>{k.padEnd(12)}</Text> {v}
        </Text>
      ))}
      <Text dimColor>Numbers come from NVML for every process, and from the gpumem agent inside PyTorch processes (gpumem-tui run -- python train.py).</Text>
    </Box>
  );
}
