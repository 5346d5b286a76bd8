// Tensors: live blocks with their names and categories, totals per category (MemReporter, live).
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { blocks, categories } from "../../profiler";
import { color, formatBytes, pad } from "../format";

export const TENSOR_SORTS = ["size", "time", "address"] as const;
export type TensorSort = (typeof TENSOR_SORTS)[number];

export function TensorsScreen(props: { pm: ProcessModel | undefined; width: number; height: number; sort: TensorSort; filter: string; selected: number }) {
  const { pm, width, height } = props;
  if (!pm || pm.model.devices.length === 0) return <Text dimColor>No PyTorch process with allocator events selected.</Text>;
  const cats = categories(pm.model);
  const view = blocks(pm.model, { sort: props.sort, limit: 5000 });
  const f = props.filter.toLowerCase();
  const rows = f ? view.blocks.filter((b) => `${b.name ?? ""} ${b.category} ${b.phase} ${b.range_name ?? ""}`.toLowerCase().includes(f)) : view.blocks;
  const catLines = cats.categories.filter((c) => c.bytes > 0);
  const room = Math.max(3, height - catLines.length - 5);
  const first = Math.max(0, Math.min(props.selected - room + 1, rows.length - room));
  // Columns: size 11, a space, category 16, name, phase 10, step 6, a space, range, age 9; the
  // name takes what is left, down to 16 (an address), then the range narrows (to nothing below 70).
  const avail = width - 1;
  const nameWidth = Math.max(16, avail - 72);
  const rangeWidth = Math.max(0, Math.min(18, avail - 54 - nameWidth));
  const lastUs = pm.model.devices[0]?.lastTime_us ?? 0;
  return (
    <Box flexDirection="column">
      <Text bold>Live memory by category: {formatBytes(cats.total_bytes)} in {view.blocks.length} blocks{props.filter ? `  (filter: ${props.filter})` : ""}</Text>
      {catLines.map((c) => (
        <Text key={c.category}>
          {pad(`  ${c.category}`, 20)}{pad(formatBytes(c.bytes), 12, true)}{pad(`${c.blocks} blocks`, 14, true)}{pad(`${Math.round(c.share * 100)}%`, 6, true)}
        </Text>
      ))}
      <Text inverse>
        {pad("SIZE", 11, true)} {pad("CATEGORY", 16)}{pad(`NAME (sort: ${props.sort})`, nameWidth)}{pad("PHASE", 10)}{pad("STEP", 6, true)} {pad("RANGE", rangeWidth)}{pad("AGE", 9, true)}
      </Text>
      {rows.slice(first, first + room).map((b, i) => (
        <Text key={b.address} inverse={first + i === props.selected} color={color(b.category === "activation" ? "magenta" : b.category === "parameter" ? "cyan" : "white")}>
          {pad(formatBytes(b.size_bytes), 11, true)} {pad(b.category, 16)}{pad(b.name ?? `0x${b.address.toString(16)}`, nameWidth)}{pad(b.phase, 10)}{pad(b.step === null ? "" : String(b.step), 6, true)} {pad(b.range_name ?? "", rangeWidth)}{pad(`${((lastUs - b.time_us) / 1e6).toFixed(1)}s`, 9, true)}
        </Text>
      ))}
    </Box>
  );
}
