// Lines: the line profiler of the selected process (functions decorated with
// @gpumem_agent.profile): per line, what it allocated and freed and the peaks while it ran.
import { Box, Text } from "ink";
import type { ReactElement } from "react";
import type { ProcessModel } from "../../collect/live";
import type { LineFunction } from "../../collect/lines";
import type { LinesState } from "../controller";
import { color, formatBytes, pad } from "../format";

export function LinesScreen({ pm, state, width, height }: { pm: ProcessModel | undefined; state: LinesState | undefined; width: number; height: number }) {
  // A recording carries no line profile: they are asked of a live agent over its socket.
  if (pm?.source === "replay")
    return <Text dimColor>pid {pm.pid} is a recording, which has no line profiles: they come from a live process whose code uses @gpumem_agent.profile (agent/README.md).</Text>;
  if (!pm || !pm.socket)
    return <Text dimColor>Line profiles come from a live process whose code uses @gpumem_agent.profile (agent/README.md); select one on the Overview.</Text>;
  if (!state) return <Text dimColor>asking pid {pm.pid} for its line profile…</Text>;
  if ("error" in state) return <Text color={color("red")}>pid {pm.pid}: {state.error}</Text>;
  if (state.functions.length === 0)
    return <Text dimColor>pid {pm.pid} has no profiled function yet: decorate one with @gpumem_agent.profile (or profile_every(n)).</Text>;
  const rows: ReactElement[] = [];
  const code = Math.max(10, width - 67); // the columns before CODE take 66
  for (const f of state.functions) rows.push(...functionRows(f, code, width));
  return (
    <Box flexDirection="column">
      <Text dimColor>pid {pm.pid}: {state.functions.length} profiled function{state.functions.length === 1 ? "" : "s"}, as of {new Date(state.at_ms).toLocaleTimeString()}</Text>
      {rows.slice(0, Math.max(1, height - 1))}
    </Box>
  );
}

function functionRows(f: LineFunction, codeWidth: number, width: number): ReactElement[] {
  const key = `${f.filename}:${f.first_line}`;
  const out = [
    <Text key={`${key}-h`} bold>
      {pad(`${f.function}  ${f.filename.split("/").pop()}:${f.first_line}  ${f.calls} calls, ${f.profiled_calls} profiled${f.lost_records ? `, ${f.lost_records} records lost: partial` : ""}`, width - 1)}
    </Text>,
    <Text key={`${key}-t`} inverse>
      {pad("LINE", 6, true)} {pad("PEAK ACTIVE", 12, true)} {pad("PEAK RESERVED", 13, true)} {pad("ALLOCATED", 11, true)} {pad("FREED", 11, true)} {pad("HITS", 6, true)}  {pad("CODE", codeWidth)}
    </Text>,
  ];
  // The heaviest lines first: a function of many lines still shows what matters in a small terminal.
  const lines = [...f.lines].sort((a, b) => (b.peak_active ?? 0) - (a.peak_active ?? 0) || b.alloc_bytes - a.alloc_bytes);
  for (const l of lines) {
    const b = (n: number | null) => (n === null ? "" : formatBytes(n));
    out.push(
      <Text key={`${key}-${l.line}`} color={color(l.alloc_bytes > 0 ? "white" : "gray")}>
        {pad(String(l.line), 6, true)} {pad(b(l.peak_active), 12, true)} {pad(b(l.peak_reserved), 13, true)} {pad(formatBytes(l.alloc_bytes), 11, true)} {pad(formatBytes(l.freed_bytes), 11, true)} {pad(String(l.hits), 6, true)}  {pad(l.code, codeWidth)}
      </Text>,
    );
  }
  return out;
}
