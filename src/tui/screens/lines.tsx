// Lines: the line profiler of the selected process (functions decorated with
// @gpumem_agent.profile), from the monitor's own model: each record carries the line running when
// it happened, so the model attributes it as it reads the ring (profiler/lines.ts), live or replayed.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import type { LineRow } from "../../profiler";
import { color, formatBytes, pad } from "../format";
import type { ScreenSpec } from "../screen-spec";
import { whose } from "../snapshot-header";

export function LinesScreen({ pm, width, height }: { pm: ProcessModel | undefined; width: number; height: number }) {
  if (!pm) return <Text dimColor>Line profiles come from a process whose code uses @gpumem_agent.profile (agent/README.md); select one on the Overview.</Text>;
  const rows = pm.model.lines.rows(pm.model.lineNames);
  if (rows.length === 0)
    return <Text dimColor>{whose(pm)}: no record carries a line: its code runs no function decorated with @gpumem_agent.profile (or profile_every(n)), whose lines show here as they allocate.</Text>;
  const loc = Math.min(28, Math.max(12, ...rows.map((r) => label(r).length)));
  const code = Math.max(10, width - loc - 62);
  return (
    <Box flexDirection="column">
      <Text dimColor>{whose(pm)}: {rows.length} line{rows.length === 1 ? "" : "s"} that allocated or freed, the heaviest first</Text>
      <Text inverse>
        {pad("LINE", loc)} {pad("PEAK ACTIVE", 12, true)} {pad("PEAK RESERVED", 13, true)} {pad("ALLOCATED", 11, true)} {pad("FREED", 11, true)} {pad("ALLOCS", 7, true)}  {pad("CODE", code)}
      </Text>
      {rows.slice(0, Math.max(1, height - 2)).map((r) => (
        <Text key={r.line} color={color(r.alloc_bytes > 0 ? "white" : "gray")}>
          {pad(label(r), loc)} {pad(formatBytes(r.peak_active_bytes), 12, true)} {pad(formatBytes(r.peak_reserved_bytes), 13, true)} {pad(formatBytes(r.alloc_bytes), 11, true)} {pad(formatBytes(r.freed_bytes), 11, true)} {pad(String(r.n_alloc), 7, true)}  {pad(r.code, code)}
        </Text>
      ))}
    </Box>
  );
}

/** Where the line is: the manifest's "file.py:42", or its id until the manifest names it. */
const label = (r: LineRow) => r.location ?? `line#${r.line}`;

export const linesScreen = {
  id: "lines",
  key: "5",
  title: "Lines",
  component: (p) => <LinesScreen pm={p.pm} width={p.width} height={p.height} />,
} as const satisfies ScreenSpec;
