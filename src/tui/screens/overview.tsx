// Overview, nvtop-style: a panel per GPU (with history charts) and the process table.
import { Box, Text } from "ink";
import type { Device, Document, Process } from "../../headless/schema";
import { areaChart, bar } from "../chart";
import type { DeviceHistory } from "../controller";
import { color, formatBytes, orNa, pad, pct, rate } from "../format";

export const PROCESS_SORTS = ["memory", "pid", "allocated", "reserved", "user"] as const;
export type ProcessSort = (typeof PROCESS_SORTS)[number];

export function sortProcesses(ps: Process[], sort: ProcessSort, filter: string): Process[] {
  const f = filter.toLowerCase();
  const shown = f ? ps.filter((p) => `${p.pid} ${p.user ?? ""} ${p.name ?? ""} ${p.command ?? ""}`.toLowerCase().includes(f)) : [...ps];
  const key: Record<ProcessSort, (p: Process) => number | string> = {
    memory: (p) => -(p.used_bytes ?? -1),
    pid: (p) => p.pid,
    allocated: (p) => -(p.pytorch?.allocated_bytes ?? -1),
    reserved: (p) => -(p.pytorch?.reserved_bytes ?? -1),
    user: (p) => p.user ?? "",
  };
  return shown.sort((a, b) => {
    const x = key[sort](a);
    const y = key[sort](b);
    return x < y ? -1 : x > y ? 1 : a.pid - b.pid;
  });
}

function DevicePanel({ d, h, width, chartRows, ascii }: { d: Device; h: DeviceHistory | undefined; width: number; chartRows: number; ascii: boolean }) {
  const total = d.memory_total_bytes ?? 0;
  const used = d.memory_used_bytes ?? 0;
  const barWidth = Math.max(10, Math.min(40, width - 50));
  const power = d.power_draw_milliwatts === null ? "n/a" : `${Math.round(d.power_draw_milliwatts / 1000)}/${d.power_limit_milliwatts === null ? "?" : Math.round(d.power_limit_milliwatts / 1000)} W`;
  const half = Math.max(10, Math.floor((width - 6) / 2));
  const util = h ? areaChart(h.util, { width: half, height: chartRows, max: 100, ascii }) : [];
  const mem = h ? areaChart(h.memUsed, { width: half, height: chartRows, max: total || 1, ascii }) : [];
  return (
    <Box flexDirection="column">
      <Text>
        <Text bold color={color("cyan")}>GPU {d.index}</Text> {pad(d.name, 26)} GPU <Text bold>{pad(pct(d.gpu_utilization_percent), 4, true)}</Text>  MEM{" "}
        <Text color={color(used / (total || 1) > 0.9 ? "red" : "green")}>{bar(used / (total || 1), barWidth, ascii)}</Text> {formatBytes(used)}/{formatBytes(total)}
      </Text>
      <Text dimColor>
        {"      "}{orNa(d.temperature_celsius, "°C")}  {power}  SM {orNa(d.sm_clock_mhz)}/{orNa(d.sm_clock_max_mhz)} MHz  MEM {orNa(d.memory_clock_mhz)} MHz  PCIe rx {rate(d.pcie_rx_bytes_per_second)} tx {rate(d.pcie_tx_bytes_per_second)}  fan {pct(d.fan_speed_percent)}  {d.performance_state === null ? "" : `P${d.performance_state}`}
      </Text>
      {chartRows > 0 && h ? (
        <Box>
          <Box flexDirection="column" marginRight={2}>
            <Text dimColor>utilization</Text>
            {util.map((l, i) => (
              <Text key={i} color={color("cyan")}>{l}</Text>
            ))}
          </Box>
          <Box flexDirection="column">
            <Text dimColor>memory used</Text>
            {mem.map((l, i) => (
              <Text key={i} color={color("green")}>{l}</Text>
            ))}
          </Box>
        </Box>
      ) : null}
    </Box>
  );
}

export function Overview(props: {
  doc: Document | null;
  history: Map<number, DeviceHistory>;
  width: number;
  height: number;
  selected: number;
  sort: ProcessSort;
  filter: string;
  ascii: boolean;
}) {
  const { doc, width, height } = props;
  if (!doc) return <Text>sampling…</Text>;
  const devices = doc.devices;
  // Height budget: 2 lines a device, charts if there is room, the rest for processes.
  const chartRows = devices.length <= 2 && height >= 30 ? 3 : devices.length <= 4 && height >= 40 ? 2 : 0;
  const deviceLines = devices.length * (2 + (chartRows ? chartRows + 1 : 0));
  const tableRows = Math.max(3, height - deviceLines - 4);
  const procs = sortProcesses(doc.processes, props.sort, props.filter);
  const first = Math.max(0, Math.min(props.selected - tableRows + 1, procs.length - tableRows));
  const cmdWidth = Math.max(10, width - 80);
  return (
    <Box flexDirection="column">
      {devices.length === 0 ? (
        <Text color={color("yellow")}>No GPU here: {doc.reason ?? "NVML reports no devices"}. Press D for a replay of a real training run recorded on an H100.</Text>
      ) : (
        devices.map((d) => <DevicePanel key={d.index} d={d} h={props.history.get(d.index)} width={width} chartRows={chartRows} ascii={props.ascii} />)
      )}
      <Text bold inverse>
        {pad("PID", 8)}{pad("USER", 9)}{pad("GPU", 4)}{pad("NVML MEM", 11, true)} {pad("ALLOCATED", 11, true)}{pad("RESERVED", 11, true)} {pad("PHASE", 9)}{pad("STEP", 6, true)} {pad("RANK", 5)}{pad(`COMMAND  (sort: ${props.sort}${props.filter ? `, filter: ${props.filter}` : ""})`, cmdWidth)}
      </Text>
      {procs.length === 0 ? <Text dimColor>no GPU processes</Text> : null}
      {procs.slice(first, first + tableRows).map((p, i) => {
        const t = p.pytorch;
        const sel = first + i === props.selected;
        return (
          <Text key={`${p.pid}-${p.device}`} inverse={sel} color={color(t ? "white" : "gray")}>
            {pad(String(p.pid), 8)}{pad(p.user ?? "?", 9)}{pad(String(p.device), 4)}{pad(p.used_bytes === null ? "n/a" : formatBytes(p.used_bytes), 11, true)} {pad(t ? formatBytes(t.allocated_bytes) : "-", 11, true)}{pad(t ? formatBytes(t.reserved_bytes) : "-", 11, true)} {pad(t ? t.phase : "", 9)}{pad(t ? String(t.step) : "", 6, true)} {pad(t?.rank === null || !t ? "" : String(t.rank), 5)}{pad(`${p.exited ? "[exited] " : ""}${p.command ?? p.name ?? ""}`, cmdWidth)}
          </Text>
        );
      })}
    </Box>
  );
}
