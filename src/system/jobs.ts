// Multi-rank jobs on one host, grouped (pure: members and the document's processes in, jobs out).
// A job is the agent processes with a rank and a world size above 1 that one launcher started
// (torchrun, torch.distributed.run and mpirun start the ranks as its children, so they share a
// parent pid), or, where the manifests carry one, the processes of one job id.
import { BEHIND_SECONDS, BEHIND_STEPS, FIRST_DIED_LEAD_SECONDS } from "./job-rules";
import { formatBytes } from "../words";
import type { Job, JobRank, Process, Pytorch } from "./schema";

export interface JobMember {
  pid: number;
  /** The parent pid (/proc/PID/stat); null where unknown (the process has exited). */
  ppid: number | null;
  rank: number | null;
  local_rank: number | null;
  world_size: number | null;
  /** The job id the manifest carries, if any. */
  job: string | null;
  /** Ranks per node and this node's number, where the launcher says (torchrun). */
  local_world_size?: number | null;
  group_rank?: number | null;
  /** The command line: /proc's, else the manifest's. */
  command: string | null;
  exited: boolean;
  /** The agent closed its ring (a clean exit); false while running or where it never did. */
  detached?: boolean;
  /** The agent's last heartbeat in its ring's header (ms since the epoch); null where unknown. */
  last_heard_unix_ms?: number | null;
}

/** What makes a member one rank of a job; null for a process that is none. */
export function jobId(m: JobMember): string | null {
  if (m.rank === null || m.world_size === null || m.world_size <= 1) return null;
  if (m.job) return m.job;
  return m.ppid === null ? null : `ppid:${m.ppid}`;
}

/** The words the command lines share from their start (a rank's own flags drop off). */
export function commonCommand(commands: (string | null)[]): string | null {
  const split = commands.filter((c): c is string => !!c).map((c) => c.trim().split(/\s+/));
  if (split.length === 0) return null;
  let n = 0;
  while (split.every((s) => s[n] !== undefined && s[n] === split[0]![n])) n++;
  return n > 0 ? split[0]!.slice(0, n).join(" ") : split[0]!.join(" ");
}

/** A step's duration in seconds; null where no complete step was timed. */
function stepSeconds(us: number | null | undefined): number | null {
  return typeof us === "number" && us >= 0 ? us / 1e6 : null;
}


/**
 * The ranks behind (rank numbers, in order). The seconds are the steps a rank lacks times the
 * leading ranks' last step time (their median); where no rank has timed a step yet (a one-shot
 * sample reads no events), the steps alone decide.
 */
export function behindRanks(ranks: JobRank[]): number[] {
  const live = ranks.filter((r) => !r.exited && r.step !== null);
  if (live.length < 2) return [];
  const lead = Math.max(...live.map((r) => r.step!));
  const times = live.filter((r) => r.step === lead && r.step_seconds !== null).map((r) => r.step_seconds!).sort((a, b) => a - b);
  const stepTime = times.length ? times[Math.floor(times.length / 2)]! : null;
  return live
    .filter((r) => {
      const steps = lead - r.step!;
      return steps > BEHIND_STEPS && (stepTime === null || steps * stepTime > BEHIND_SECONDS);
    })
    .map((r) => r.rank);
}

function rankOf(m: JobMember, rows: Process[]): JobRank {
  // A process NVML lists on several devices shows the same totals on each where its agent sees
  // one device: one figure per device the agent counts (pytorch.device), never the same twice.
  const perDevice = new Map<number, Pytorch>();
  for (const r of rows) if (r.pytorch && !perDevice.has(r.pytorch.device)) perDevice.set(r.pytorch.device, r.pytorch);
  const figures = [...perDevice.values()];
  const sum = (f: (t: Pytorch) => number) => (figures.length ? figures.reduce((a, t) => a + f(t), 0) : null);
  const main = [...rows].sort((a, b) => (b.pytorch?.reserved_bytes ?? -1) - (a.pytorch?.reserved_bytes ?? -1))[0];
  return {
    rank: m.rank!,
    local_rank: m.local_rank,
    pid: m.pid,
    device: main?.device ?? null,
    allocated_bytes: sum((t) => t.allocated_bytes),
    reserved_bytes: sum((t) => t.reserved_bytes),
    peak_allocated_bytes: sum((t) => t.peak_allocated_bytes),
    peak_reserved_bytes: sum((t) => t.peak_reserved_bytes),
    phase: main?.pytorch?.phase ?? null,
    step: main?.pytorch?.step ?? null,
    step_seconds: stepSeconds(main?.pytorch?.profile?.last_step?.duration_us),
    exited: m.exited || (rows.length > 0 && rows.every((r) => r.exited)),
    died: m.exited && m.detached === false,
    outside_pytorch_bytes: figures.length && figures.every((t) => t.non_pytorch_bytes !== null) ? figures.reduce((a, t) => a + t.non_pytorch_bytes!, 0) : null,
    ...(main?.pytorch?.ledger ? { ledger: main.pytorch.ledger } : {}),
  };
}

/** Outside PyTorch, a rank stands out at this much above the others' median, and this share of it. */
const OUTSIDE_STANDOUT_BYTES = 256 * 2 ** 20;
const OUTSIDE_STANDOUT_SHARE = 0.25;

/** The rank whose memory outside PyTorch stands out above the others' median, by how much, and
 *  the ledger row that differs most from the median rank's ("NCCL +900.00 MiB"). */
export function outsideStandout(ranks: JobRank[]): { rank: number; margin: number; part: string | null } | null {
  const known = ranks.filter((r) => r.outside_pytorch_bytes !== null && !r.exited).sort((a, b) => b.outside_pytorch_bytes! - a.outside_pytorch_bytes! || a.rank - b.rank);
  if (known.length < 2) return null;
  const [top, ...others] = known;
  const mid = others[Math.floor((others.length - 1) / 2)]!; // the others' median (the lower middle)
  const margin = top!.outside_pytorch_bytes! - mid.outside_pytorch_bytes!;
  if (margin < OUTSIDE_STANDOUT_BYTES || margin < OUTSIDE_STANDOUT_SHARE * Math.max(0, mid.outside_pytorch_bytes!)) return null;
  let part: string | null = null;
  if (top!.ledger && mid.ledger) {
    const outside = (l: NonNullable<JobRank["ledger"]>) => new Map(l.rows.filter((r) => r.kind === "context" || r.kind === "library" || r.kind === "unexplained").map((r): [string, number] => [r.name, r.bytes]));
    const a = outside(top!.ledger);
    const b = outside(mid.ledger);
    let best: [string, number] | null = null;
    for (const name of new Set([...a.keys(), ...b.keys()])) {
      const d = (a.get(name) ?? 0) - (b.get(name) ?? 0);
      if (best === null || d > best[1]) best = [name, d];
    }
    if (best && best[1] > 0) part = `${best[0]} +${formatBytes(best[1])}`;
  }
  return { rank: top!.rank, margin, part };
}

/**
 * The jobs among `members` (the agent processes), with their ranks' figures from `processes` (the
 * document's rows). A member with no row is shown nowhere, so its job counts its rank missing.
 * Processes that are no rank of a multi-rank job belong to no job.
 */
export function groupJobs(processes: Process[], members: JobMember[]): Job[] {
  const rows = new Map<number, Process[]>();
  for (const p of processes) {
    let list = rows.get(p.pid);
    if (!list) rows.set(p.pid, (list = []));
    list.push(p);
  }
  // One launcher may restart its ranks with another world size (elastic): those are two jobs.
  const groups = new Map<string, { id: string; worldSize: number; members: JobMember[] }>();
  for (const m of [...members].sort((a, b) => a.pid - b.pid)) {
    const id = jobId(m);
    if (id === null || !rows.has(m.pid)) continue;
    const key = `${id}\0${m.world_size}`;
    let g = groups.get(key);
    if (!g) groups.set(key, (g = { id, worldSize: m.world_size!, members: [] }));
    g.members.push(m);
  }
  const ids = new Map<string, number>();
  for (const g of groups.values()) ids.set(g.id, (ids.get(g.id) ?? 0) + 1);
  const jobs: Job[] = [];
  for (const g of groups.values()) {
    const ranks = g.members.map((m) => rankOf(m, rows.get(m.pid)!)).sort((a, b) => a.rank - b.rank || a.pid - b.pid);
    const present = new Set(ranks.map((r) => r.rank));
    const here = hostRanks(g.members, g.worldSize);
    const missing: number[] = [];
    for (let r = here.first; r < here.first + here.count; r++) if (!present.has(r)) missing.push(r);
    const used = g.members.flatMap((m) => rows.get(m.pid)!.map((p) => p.used_bytes)).filter((u): u is number => u !== null);
    const steps = ranks.map((r) => r.step).filter((s): s is number => s !== null);
    const peaks = ranks.filter((r) => r.peak_allocated_bytes !== null).sort((a, b) => b.peak_allocated_bytes! - a.peak_allocated_bytes! || a.rank - b.rank);
    const top = peaks.length >= 2 ? peaks[0]! : null;
    const parents = new Set(g.members.map((m) => m.ppid));
    const launcher = parents.size === 1 ? [...parents][0]! : null;
    const byRank = [...g.members].sort((a, b) => a.rank! - b.rank! || a.pid - b.pid);
    const outside = outsideStandout(ranks);
    jobs.push({
      id: ids.get(g.id)! > 1 ? `${g.id}:world_size=${g.worldSize}` : g.id,
      name: commonCommand(byRank.map((m) => m.command)) ?? g.id,
      launcher_pid: launcher,
      world_size: g.worldSize,
      pids: ranks.map((r) => r.pid),
      ranks,
      missing_ranks: missing,
      host_ranks: here.known ? { first: here.first, count: here.count } : null,
      used_bytes: used.length ? used.reduce((a, b) => a + b, 0) : null,
      allocated_bytes: ranks.reduce((a, r) => a + (r.allocated_bytes ?? 0), 0),
      reserved_bytes: ranks.reduce((a, r) => a + (r.reserved_bytes ?? 0), 0),
      step_min: steps.length ? Math.min(...steps) : null,
      step_max: steps.length ? Math.max(...steps) : null,
      peak_rank: top?.rank ?? null,
      peak_allocated_bytes: top?.peak_allocated_bytes ?? null,
      peak_margin_bytes: top ? top.peak_allocated_bytes! - peaks[1]!.peak_allocated_bytes! : null,
      outside_rank: outside?.rank ?? null,
      outside_margin_bytes: outside?.margin ?? null,
      outside_part: outside?.part ?? null,
      state: jobState(ranks, missing),
      behind_ranks: behindRanks(ranks),
      first_died: firstDied(g.members, ranks, launcher),
    });
  }
  return jobs.sort((a, b) => a.pids[0]! - b.pids[0]!);
}


/**
 * The rank that died first, where two ranks or more died (their agents never closed their rings)
 * under one launcher: torchrun, mpirun stop every other rank once one fails, so most of those
 * deaths are the launcher's doing. The first is the rank whose agent fell silent (its ring's last
 * heartbeat) more than FIRST_DIED_LEAD_SECONDS before every other exited rank's; null where none
 * stands out that clearly (they ended together) or a rank's heartbeat is unknown.
 */
export function firstDied(members: JobMember[], ranks: JobRank[], launcher: number | null): number | null {
  const exited = ranks.filter((r) => r.exited);
  if (launcher === null || exited.filter((r) => r.died).length < 2) return null;
  const heard = new Map(members.map((m) => [m.pid, m.last_heard_unix_ms ?? null]));
  const times = exited.map((r) => ({ rank: r.rank, died: r.died, t: heard.get(r.pid) ?? null }));
  if (times.some((x) => x.t === null)) return null;
  times.sort((a, b) => a.t! - b.t!);
  const [first, next] = [times[0]!, times[1]!];
  return first.died && next.t! - first.t! > FIRST_DIED_LEAD_SECONDS * 1000 ? first.rank : null;
}

/** Every rank here and alive; some missing or gone while others run; or all gone. */
export function jobState(ranks: JobRank[], missing: number[]): Job["state"] {
  const alive = ranks.filter((r) => !r.exited).length;
  if (alive === 0) return ranks.some((r) => r.died) ? "incomplete" : "ended";
  return missing.length > 0 || alive < ranks.length ? "incomplete" : "running";
}

/**
 * The ranks this host should run: the node's block where every member agrees on the launcher's
 * local_world_size and group_rank (torchrun), else all of 0 … world_size − 1.
 */
export function hostRanks(members: JobMember[], worldSize: number): { first: number; count: number; known: boolean } {
  const lws = new Set(members.map((m) => m.local_world_size ?? null));
  const gr = new Set(members.map((m) => m.group_rank ?? null));
  const l = [...lws][0];
  const g = [...gr][0];
  if (lws.size === 1 && gr.size === 1 && typeof l === "number" && typeof g === "number" && l < worldSize) {
    const first = Math.min(g * l, worldSize);
    return { first, count: Math.max(0, Math.min(l, worldSize - first)), known: true };
  }
  return { first: 0, count: worldSize, known: false };
}

/** [0, 1, 2, 5, 7, 8] → "0-2, 5, 7-8". */
export function rankList(ranks: number[]): string {
  const sorted = [...new Set(ranks)].sort((a, b) => a - b);
  const parts: string[] = [];
  for (let i = 0; i < sorted.length; ) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j]! + 1) j++;
    parts.push(j > i ? `${sorted[i]}-${sorted[j]}` : `${sorted[i]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

const ranksWord = (ranks: number[]) => `${ranks.length === 1 ? "rank" : "ranks"} ${rankList(ranks)}`;

/** What a user looks for in a job, in words: ranks missing or gone, ranks behind, the rank that peaks above the others. */
export function jobNotes(job: Job): string[] {
  const notes: string[] = [];
  if (job.missing_ranks.length) notes.push(`${ranksWord(job.missing_ranks)} missing`);
  const first = job.first_died ?? null;
  const died = job.ranks.filter((r) => r.died && r.rank !== first).map((r) => r.rank);
  if (first !== null) {
    // One rank died and the launcher stopped the rest: the one to look at is named, the others said stopped.
    notes.push(`rank ${first} died first (killed or crashed)`);
    const stopped = job.ranks.filter((r) => r.exited && r.rank !== first).map((r) => r.rank);
    if (stopped.length) notes.push(`${ranksWord(stopped)} stopped by the launcher`);
  } else {
    if (died.length) notes.push(`${ranksWord(died)} killed or crashed`);
    const exited = job.ranks.filter((r) => r.exited && !r.died).map((r) => r.rank);
    if (exited.length) notes.push(`${ranksWord(exited)} exited`);
  }
  // The word a user scans for when a rank died under a running job.
  if (job.state === "incomplete") notes[0] = `incomplete: ${notes[0]}`;
  const behind = job.behind_ranks ?? [];
  if (behind.length && job.step_min !== null && job.step_max !== null) {
    notes.push(`steps ${job.step_min}-${job.step_max}, ${behind.length <= 3 ? ranksWord(behind) : `${behind.length} ranks`} behind`);
  }
  if (job.peak_rank !== null && job.peak_margin_bytes !== null && job.peak_margin_bytes > 0) {
    notes.push(`rank ${job.peak_rank} peaks ${formatBytes(job.peak_margin_bytes)} above the others`);
  }
  if (job.outside_rank !== null && job.outside_margin_bytes !== null) {
    notes.push(`rank ${job.outside_rank} holds ${formatBytes(job.outside_margin_bytes)} more outside PyTorch than the others${job.outside_part ? ` (${job.outside_part})` : ""}`);
  }
  return notes;
}
