// Help: every key, one key away.
import { Box, Text } from "ink";

/** Every key but the screens' own (their keys come from the list of screens). */
export const KEYS: [string, string][] = [
  ["↑ ↓  j k", "move the selection"],
  ["Enter", "open the selected process"],
  ["s", "change the sort order"],
  ["/", "filter (type, Enter to keep, Esc to clear)"],
  ["space  p", "pause / resume sampling"],
  ["+ -", "sampling interval"],
  ["d", "snapshot of the selected process, for pytorch.org/memory_viz"],
  ["e", "empty the selected process's cache (asks first)"],
  ["r", "reset the selected process's peaks"],
  ["D", "replay a real training run recorded on an H100 (the demo)"],
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
          <Text bold>{k.padEnd(12)}</Text> {v}
        </Text>
      ))}
      <Text dimColor>Numbers come from NVML for every process, and from the gpumem agent inside PyTorch processes (gpumem-tui run -- python train.py).</Text>
    </Box>
  );
}
