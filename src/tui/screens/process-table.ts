// The Overview's process table, nvtop / nvitop / htop style: which columns fit the width, what
// each cell of a process or a job row says, and the sort each column stands for. Unknown is "–",
// never 0.
import type { Job, Process } from "../../system/schema";
import { cut, cutMiddle, formatBytes, formatDuration, pad, phaseLabel, recordedMark, textWidth, UNKNOWN } from "../format";

/** The process table's sorts, one a column (`s` steps through those of the columns shown, in their order). */
export const PROCESS_SORTS = ["memory", "pid", "allocated", "reserved", "user", "gpu", "sm", "cpu", "host", "time", "phase", "step", "rank", "command"] as const;
export type ProcessSort = (typeof PROCESS_SORTS)[number];

/** What each sort orders by; numbers largest first (unknown last), pid and user in ascending order. */
const SORT_KEY: Record<ProcessSort, (p: Process) => number | string> = {
  memory: (p) => -(p.used_bytes ?? -1),
  pid: (p) => p.pid,
  allocated: (p) => -(p.pytorch?.allocated_bytes ?? -1),
  reserved: (p) => -(p.pytorch?.reserved_bytes ?? -1),
  user: (p) => p.user ?? "",
  sm: (p) => -(p.gpu_sm_percent ?? -1),
  cpu: (p) => -(p.cpu_percent ?? -1),
  host: (p) => -(p.host_memory_bytes ?? -1),
  time: (p) => -(p.run_time_seconds ?? -1),
  gpu: (p) => p.device,
  phase: (p) => (p.pytorch ? phaseLabel(p.pytorch.phase) : "~"),
  step: (p) => -(p.pytorch?.step ?? -1),
  rank: (p) => p.pytorch?.rank ?? Number.MAX_SAFE_INTEGER,
  command: (p) => (p.command ? commandShown(p.command) : (p.name ?? "~")).toLowerCase(),
};

/** Sorts whose order is smallest first (names, numbers that are not amounts). */
const ASCENDING = new Set<ProcessSort>(["pid", "user", "gpu", "phase", "rank", "command"]);

/** `reverse` turns the order round (smallest memory first, highest pid first); equal keys stay by pid. */
export function sortProcesses(ps: Process[], sort: ProcessSort, filter: string, reverse = false): Process[] {
  const f = filter.toLowerCase();
  const shown = f ? ps.filter((p) => `${p.pid} ${p.user ?? ""} ${p.name ?? ""} ${recordedMark(p)}${p.command ?? ""}`.toLowerCase().includes(f)) : [...ps];
  const key = SORT_KEY[sort];
  const dir = reverse ? -1 : 1;
  return shown.sort((a, b) => {
    const x = key(a);
    const y = key(b);
    return x < y ? -dir : x > y ? dir : a.pid - b.pid;
  });
}

/** Larger values first (▼), or smaller first (▲), as the sort and its reversal leave them. */
export function sortArrow(sort: ProcessSort, reverse: boolean, ascii: boolean): string {
  const descending = !ASCENDING.has(sort) !== reverse;
  return descending ? (ascii ? "v" : "▼") : ascii ? "^" : "▲";
}

interface Column {
  title: string;
  width: number;
  right?: boolean;
  /** A space before the cell (between two right-aligned numbers and what follows). */
  gap?: boolean;
  /** The sort a click on this column's header chooses. */
  sort?: ProcessSort;
  process: (p: Process, inJob: boolean) => string;
  job: (j: Job, users: Set<string>) => string;
}

const bytesOr = (v: number | null | undefined) => (v === null || v === undefined ? UNKNOWN : formatBytes(v));
const pctOr = (v: number | null | undefined) => (v === null || v === undefined ? UNKNOWN : `${Math.round(v)}%`);

function devicesOf(job: Job): string {
  const devices = [...new Set(job.ranks.map((r) => r.device).filter((d): d is number => d !== null))].sort((a, b) => a - b);
  const contiguous = devices.length > 1 && devices[devices.length - 1]! - devices[0]! === devices.length - 1;
  return contiguous ? `${devices[0]}-${devices[devices.length - 1]}` : devices.join(",");
}

const PID: Column = {
  title: "PID",
  width: 8,
  sort: "pid",
  // A rank of a job: its pid indented under the job's row.
  process: (p, inJob) => (inJob ? `${String(p.pid).length <= 6 ? "  " : " "}${p.pid}` : String(p.pid)),
  job: () => "job",
};
const USER: Column = { title: "USER", width: 9, sort: "user", process: (p) => p.user ?? "?", job: (_j, users) => (users.size === 1 ? [...users][0]! : "") };
const GPU: Column = { title: "GPU", width: 4, sort: "gpu", process: (p) => String(p.device), job: devicesOf };
const SM: Column = { title: "SM%", width: 4, right: true, sort: "sm", process: (p) => pctOr(p.gpu_sm_percent), job: () => "" };
const NVML: Column = { title: "GPU MEM", width: 11, right: true, sort: "memory", process: (p) => (p.used_bytes === null ? UNKNOWN : formatBytes(p.used_bytes)), job: (j) => bytesOr(j.used_bytes) };
const ALLOCATED: Column = { title: "ALLOCATED", width: 11, right: true, gap: true, sort: "allocated", process: (p) => (p.pytorch ? formatBytes(p.pytorch.allocated_bytes) : UNKNOWN), job: (j) => formatBytes(j.allocated_bytes) };
const RESERVED: Column = { title: "RESERVED", width: 11, right: true, sort: "reserved", process: (p) => (p.pytorch ? formatBytes(p.pytorch.reserved_bytes) : UNKNOWN), job: (j) => formatBytes(j.reserved_bytes) };
const CPU: Column = { title: "CPU%", width: 6, right: true, sort: "cpu", process: (p) => pctOr(p.cpu_percent), job: () => "" };
const HOST: Column = { title: "HOST MEM", width: 11, right: true, sort: "host", process: (p) => bytesOr(p.host_memory_bytes), job: () => "" };
const TIME: Column = { title: "TIME", width: 10, right: true, sort: "time", process: (p) => (p.run_time_seconds === null ? UNKNOWN : formatDuration(p.run_time_seconds)), job: () => "" };
const PHASE: Column = {
  title: "PHASE",
  width: 9,
  gap: true,
  sort: "phase",
  process: (p) => (p.pytorch ? phaseLabel(p.pytorch.phase) : ""),
  job: (j) => {
    const phases = new Set(j.ranks.map((r) => r.phase).filter((x) => x !== null));
    return phases.size === 1 ? phaseLabel([...phases][0]!) : phases.size ? "mixed" : "";
  },
};
const STEP: Column = {
  title: "STEP",
  width: 6,
  right: true,
  sort: "step",
  process: (p) => (p.pytorch ? String(p.pytorch.step) : ""),
  job: (j) => (j.step_min === null ? "" : j.step_min === j.step_max ? String(j.step_min) : `${j.step_min}-${j.step_max}`),
};
const RANK: Column = {
  title: "RANK",
  width: 5,
  gap: true,
  sort: "rank",
  process: (p) => (p.pytorch?.rank === null || !p.pytorch ? "" : String(p.pytorch.rank)),
  job: (j) => `${new Set(j.ranks.map((r) => r.rank)).size}/${j.world_size}`,
};

/** The columns a width holds, in order, and what is left for COMMAND. At 80 columns: PID, GPU,
 *  GPU memory, PyTorch's allocated and reserved, step (and rank where a process has one), and
 *  COMMAND with the script and its first arguments (issue 39: two runs of one script told apart);
 *  wider, SM% and PHASE, then the host's figures (CPU %, resident memory, run time) and USER join,
 *  as room allows. `oneGpu`: every row is on one GPU (the header above names it). */
export function tableColumns(width: number, ranks = true, oneGpu = false): { cols: Column[]; command: number } {
  const cellWidth = (c: Column) => c.width + (c.gap ? 1 : 0);
  // Where COMMAND would be narrower than NARROW_COMMAND, the columns that say least give way, in
  // order: PHASE (sampled once an interval, a training's phase changes every few milliseconds: at
  // the Overview's pace it reads as chance; the Process screen tells it), SM% (a process's SM share
  // is often unknown, and the GPU's utilization is in the header), then GPU where every row is on
  // one GPU. A job's GPU column (its devices, "0-3") stays: its rows are on several.
  let base = [PID, GPU, SM, NVML, ALLOCATED, RESERVED, PHASE, STEP, ...(ranks ? [RANK] : [])];
  for (const c of [PHASE, SM, ...(oneGpu ? [GPU] : [])]) {
    if (width - 1 - base.reduce((s, x) => s + cellWidth(x), 0) >= NARROW_COMMAND) break;
    base = base.filter((x) => x !== c);
  }
  let used = base.reduce((s, c) => s + cellWidth(c), 0);
  const minCommand = 30;
  const extra = new Set<Column>();
  for (const c of [CPU, USER, HOST, TIME]) {
    if (used + cellWidth(c) + minCommand > width - 1) break;
    extra.add(c);
    used += cellWidth(c);
  }
  const has = (c: Column) => base.includes(c);
  const order = [PID, ...(extra.has(USER) ? [USER] : []), ...[GPU, SM, NVML, ALLOCATED, RESERVED].filter(has), ...[CPU, HOST, TIME].filter((c) => extra.has(c)), ...[PHASE, STEP].filter(has), ...(ranks ? [RANK] : [])];
  return { cols: order, command: Math.max(4, width - 1 - used) };
}

export type Table = ReturnType<typeof tableColumns>;

/** A line of the table in pieces: each column's cell (with its sort) and the gaps between them. */
function parts(t: Table, cell: (c: Column) => string, command: string, commandSort?: ProcessSort): Array<{ text: string; sort?: ProcessSort }> {
  return [
    ...t.cols.flatMap((c) => [...(c.gap ? [{ text: " " }] : []), { text: pad(cell(c), c.width, c.right), sort: c.sort }]),
    { text: " " + pad(command, t.command - 1), sort: commandSort },
  ];
}

/** The sorts of the columns `t` shows, in their order: what `s` steps through. */
export function visibleSorts(t: Table): ProcessSort[] {
  return [...t.cols.flatMap((c) => (c.sort ? [c.sort] : [])), "command"];
}

const line = (t: Table, cell: (c: Column) => string, command: string) =>
  parts(t, cell, command)
    .map((x) => x.text)
    .join("");

/** The header's pieces, the sorted column's title marked with the direction (▼ larger first). */
export function headerParts(t: Table, title: string, sort: ProcessSort, reverse: boolean, ascii: boolean) {
  const arrow = sortArrow(sort, reverse, ascii);
  return parts(t, (c) => (c.sort === sort ? `${c.title}${arrow}` : c.title), sort === "command" ? title.replace("COMMAND", `COMMAND${arrow}`) : title, "command");
}

/** The sort whose column header is at column `x` (from 1), or null. */
export function sortAtColumn(t: Table, x: number): ProcessSort | null {
  let at = 0;
  for (const p of parts(t, (c) => c.title, "", "command")) {
    if (x - 1 >= at && x - 1 < at + p.text.length) return p.sort ?? null;
    at += p.text.length;
  }
  return null;
}

/**
 * What COMMAND shows of a command line: the script and its arguments ("train.py --lr 3e-4"), not
 * the interpreter's path before it; a module run with -m by its name; another program by its file
 * name. The filter still reads the whole command line.
 */
export function commandShown(command: string): string {
  const words = command.trim().split(/\s+/);
  const base = (w: string) => w.slice(w.lastIndexOf("/") + 1);
  if (!/^(python|pypy)[\d.]*$/.test(base(words[0] ?? ""))) return [base(words[0] ?? ""), ...words.slice(1)].join(" ");
  let i = 1;
  // The interpreter's own options (-u, -O, -X dev, -W ignore) come before the script.
  while (i < words.length && words[i]!.startsWith("-") && words[i] !== "-m" && words[i] !== "-c") i += /^-[XW]$/.test(words[i]!) ? 2 : 1;
  if (words[i] === "-m" || words[i] === "-c") return words.slice(i + (words[i] === "-m" ? 1 : 0)).join(" ");
  return i < words.length ? [base(words[i]!), ...words.slice(i + 1)].join(" ") : command;
}

/** Where COMMAND is narrow (80 columns), the marks are short so that the script's name shows; wider,
 *  they are short where the whole command would not fit beside the long ones. */
const NARROW_COMMAND = 30;

/** `alert`: the finding mark that leads COMMAND ("! "), where the process has one. */
export function processCells(t: Table, p: Process, inJob: boolean, alert = ""): string {
  // A pid NVML lists that /proc has nothing of (exited with its memory held, or in another
  // container: the GPU ledger's gone row) says so rather than a blank COMMAND.
  const gone = p.user === null && p.name === null && p.command === null && !p.recorded;
  const command = p.command ? commandShown(p.command) : (p.name ?? (gone ? "[no process here]" : ""));
  const marksOf = (short: boolean) => `${alert}${p.exited ? (short ? "[exit] " : "[exited] ") : ""}${p.recorded && short ? "[rec] " : recordedMark(p)}`;
  // Short marks wherever the long ones would leave out the script's first argument (what tells two
  // runs of one script apart): "[rec] hf_gpt2.py --seconds 30…", not "[recorded] hf_gpt2.py…".
  const [script = "", first, second] = command.split(" ");
  const head = [script, first, second].filter((w) => w !== undefined).join(" ");
  const narrow = t.command < NARROW_COMMAND || textWidth(marksOf(false) + head) + (head.length < command.length ? 2 : 0) > t.command - 1;
  return line(t, (c) => c.process(p, inJob), cutCommand(marksOf(narrow), command, t.command - 1));
}
/**
 * COMMAND in `width` columns: the marks, the script, then its first arguments, each whole, and " …"
 * where some are left out; the script cut only where it alone is too long.
 */
export function cutCommand(marks: string, command: string, width: number): string {
  if (textWidth(marks + command) <= width) return marks + command;
  const [script = "", ...args] = command.split(" ");
  const head = marks + script;
  // A name alone (a replay's file) too long: cut in its middle ("hf-gpt2-leak…ring.gz"), its end
  // naming the file; a script with arguments after it, at its end ("hf_gp…": one "…" for both).
  if (!args.length && width - textWidth(marks) >= 5) return marks + cutMiddle(script, width - textWidth(marks));
  // Where arguments are left out, " …" stands for them: a word of its own, so that a whole
  // argument before it ("--seconds 30 …") never reads as a figure cut ("30…").
  if (textWidth(head) + 2 > width) return `${cut(head, width - 1)}…`;
  let out = head;
  for (const a of args) {
    if (textWidth(`${out} ${a}`) + 2 > width) break;
    out += ` ${a}`;
  }
  return `${out} …`;
}

export const jobCells = (t: Table, j: Job, users: Set<string>, title: string) => line(t, (c) => c.job(j, users), title);
