// `view FILE` on the screens: a snapshot is a file, not a process. The frame's header says what the
// file is (its name as given, the span its trace recorded, torch's totals at its end) where a live
// process would show a pid, an interval and NVML; the screens name it "the snapshot" where they
// would name a pid, and its charts' time runs from the recording's first entry.
import type { ProcessModel } from "../collect/live";
import type { SnapshotFacts } from "../snapshot/view";
import { counted, formatBytes } from "../words";
import { GUTTER } from "./chart";
import { cutStart, textWidth } from "./format";
import { formatSpan } from "./screens/timeline-rows";

export type { SnapshotFacts };

/** How a screen names the process it shows: "pid 4242", or "the snapshot" for `view FILE`. */
export function whose(pm: Pick<ProcessModel, "pid" | "snapshot">): string {
  return pm.snapshot ? "the snapshot" : `pid ${pm.pid}`;
}

/** "2026-11-26 08:30:12": when the recording began, in local time; null where the trace's times
 *  are not wall-clock times (a clock that counts from the machine's start, say). */
function startedAt(us: number): string | null {
  const d = new Date(us / 1000);
  const year = d.getFullYear();
  if (!(year >= 2000 && year < 2100)) return null;
  const p = (n: number) => String(n).padStart(2, "0");
  return `${year}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}`;
}

/** What the trace covers: "recorded 0.51 s from 2026-11-26 08:30:12" (`when`: with the date). */
function spanWords(f: SnapshotFacts, when: boolean): string {
  if (f.entries === 0) return "no trace (taken without memory history)";
  if (f.first_time_us === null || f.last_time_us === null) return `${counted(f.entries, "trace entry", "trace entries")}, without times`;
  const at = when ? startedAt(f.first_time_us) : null;
  return `recorded ${formatSpan(f.last_time_us - f.first_time_us)}${at ? ` from ${at}` : ""}`;
}

/** torch's totals at the snapshot's end: "torch: 71.19 MiB allocated of 84.00 MiB reserved in 12 segments". */
function totalsWords(f: SnapshotFacts, segments: boolean): string {
  const where = segments ? ` in ${counted(f.segments, "segment")}${f.devices > 1 ? ` on ${f.devices} devices` : ""}` : f.devices > 1 ? ` on ${f.devices} devices` : "";
  return `torch: ${formatBytes(f.allocated_bytes)} allocated of ${formatBytes(f.reserved_bytes)} reserved${where}`;
}

/**
 * The header line of a snapshot in `width` columns: the most of it that fits. The file's size, the
 * recording's date, the segments' count and then the span are left out first; the path is cut at
 * its start down to its file name (its end names the file). Narrower still, the totals in short
 * ("allocated 8.00 GiB  reserved 9.00 GiB") beside the path cut to what is left: the totals are
 * never cut.
 */
export function snapshotHeader(f: SnapshotFacts, width: number): string {
  const base = f.file.slice(f.file.lastIndexOf("/") + 1);
  const tries: [boolean, boolean, boolean, boolean][] = [
    // size, date, segments, span
    [true, true, true, true],
    [false, true, true, true],
    [false, false, true, true],
    [false, false, false, true],
    [false, false, false, false],
  ];
  for (const [size, date, segs, span] of tries) {
    const rest = `${size ? ` (${formatBytes(f.bytes)})` : ""}${span ? `  ${spanWords(f, date)}` : ""}  ${totalsWords(f, segs)}`;
    const room = width - textWidth("snapshot ") - textWidth(rest);
    // The path whole, or cut to no less than "…" and its file name.
    if (room >= Math.min(textWidth(f.file), textWidth(base) + 1)) return `snapshot ${cutStart(f.file, room)}${rest}`;
  }
  const short = `  allocated ${formatBytes(f.allocated_bytes)}  reserved ${formatBytes(f.reserved_bytes)}`;
  return `${cutStart(f.file, Math.max(1, width - textWidth(short)))}${short}`;
}

/**
 * The time axis under a chart of a recording, `width` cells from `fromUs` to `toUs` (µs since the
 * recording's first entry): its start, middle and end, in the recording's own time ("0", "0.25 s",
 * "0.51 s"), after a blank gutter; never "-0.5 s … end", which is a live process's time.
 */
export function recordingAxis(width: number, fromUs: number, toUs: number): string {
  const cells = new Array<string>(width).fill(" ");
  const put = (at: number, text: string) => {
    const start = Math.max(0, Math.min(width - text.length, at));
    for (let k = 0; k < text.length && start + k < width; k++) cells[start + k] = text[k]!;
  };
  const label = (us: number) => (us <= 0 ? "0" : formatSpan(us));
  put(0, label(fromUs));
  if (width >= 30) {
    const mid = label((fromUs + toUs) / 2);
    put(Math.floor(width / 2) - Math.floor(mid.length / 2), mid);
  }
  const end = label(toUs);
  put(width - end.length, end);
  return " ".repeat(GUTTER) + cells.join("");
}
