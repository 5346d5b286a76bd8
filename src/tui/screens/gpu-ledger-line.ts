// A GPU's line of what its memory is made of (the document's devices[].ledger, issue 40): the
// processes NVML lists, other users', memory held by pids that no longer exist here, used that no
// listed process accounts for (in a container: every process outside it, which the driver does not
// list there), the driver's reserve and free, summing to the GPU's total. Shown
// under the GPU's header on the Overview, where nvtop and nvitop users look at a GPU's memory.
import type { Device } from "../../system/schema";
import { cutWords, formatBytes, textWidth } from "../format";

type Row = NonNullable<Device["ledger"]>["rows"][number];

/** Each row's words, long (wide terminals) and short (80 columns). */
const LABELS: Record<Row["kind"], [string, string]> = {
  processes: ["processes", "procs"],
  other_users: ["other users", "others"],
  gone: ["held by gone pids", "gone"],
  not_listed: ["not listed", "unlisted"],
  driver_reserved: ["driver reserved", "driver"],
  free: ["free", "free"],
};
/** not_listed where the monitor runs in a container (the ledger's container_view): the driver lists
 *  to NVML only this pid namespace's processes, so it is every other process's memory. */
const OUTSIDE_VIEW: [string, string] = ["outside this container's view", "outside container"];

/** Rows that may give way on a narrow line, first to go first: each is also in the GPU's used and
 *  total figures on the header above (gone, other users and free never give way). */
const YIELD: Row["kind"][] = ["driver_reserved", "not_listed"];

export interface GpuLedgerLine {
  text: string;
  /** Memory held by a pid that no longer exists here (the line is drawn as a warning). */
  gone: boolean;
}

/** The line in `width` columns (indented as the header's second line), or null where the GPU has
 *  no ledger (no NVML memory figures). Rows of 0 bytes other than processes and free are left out
 *  (a GPU with no other user's process says nothing of them). */
export function gpuLedgerLine(d: Device, width: number): GpuLedgerLine | null {
  const l = d.ledger;
  if (!l) return null;
  const shown = l.rows.filter((r) => r.bytes !== 0 || r.kind === "processes" || r.kind === "free");
  const gone = shown.some((r) => r.kind === "gone");
  const word = (r: Row, long: boolean) => {
    const label = (r.kind === "not_listed" && l.container_view ? OUTSIDE_VIEW : LABELS[r.kind])[long ? 0 : 1];
    const bytes = `${r.bytes < 0 ? "−" : ""}${formatBytes(Math.abs(r.bytes))}`;
    // The gone pids named where the line is wide (one pid: its number, else how many).
    const pids = long && r.kind === "gone" ? ` (${r.pids.length === 1 ? `pid ${r.pids[0]}` : `${r.pids.length} pids`})` : "";
    const count = long && (r.kind === "processes" || r.kind === "other_users") && r.pids.length ? ` (${r.pids.length})` : "";
    return `${label}${count} ${bytes}${pids}`;
  };
  const line = (rows: Row[], long: boolean) => `      ${long ? "memory: " : ""}${rows.map((r) => word(r, long)).join(long ? " · " : "  ")}`;
  const tries: string[] = [line(shown, true), line(shown, false)];
  let rows = shown;
  for (const k of YIELD) {
    rows = rows.filter((r) => r.kind !== k);
    tries.push(line(rows, false));
  }
  // Narrower still (a tmux split): the indent goes before any figure does.
  tries.push(line(rows, false).trimStart());
  const text = tries.find((t) => textWidth(t) <= width) ?? cutWords(tries.at(-1)!, width);
  return { text, gone };
}
