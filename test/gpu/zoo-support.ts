// The zoo's judgement and its runner (test/gpu/zoo.ts): each set-up runs once plain and once under
// `gpumem-tui run --json`, and this file says whether the agent harmed it. The judging functions are
// pure (text and documents in, verdicts out) so test/gpu/zoo.test.ts holds them to recorded
// outputs; the runner spawns each run bounded, in its own process group, so that a set-up that
// hangs or dies is a row of the table and never stops the rest.
import { closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { Document } from "../../src/system/schema";

// ---- what a program prints --------------------------------------------------------------------------

/** The line every zoo program prints last (test/gpu/zoo/common.py report_totals). */
export const TOTALS_TAG = "TORCH_TOTALS ";

export interface TorchTotals {
  pid: number;
  rank: number | null;
  /** CUDA index as the process numbers its devices → torch's own figures after synchronize. */
  devices: Record<string, { allocated: number; reserved: number }>;
}

/** Every TORCH_TOTALS line of an output (one per process: torchrun's ranks print one each). */
export function parseTotals(stdout: string): TorchTotals[] {
  const out: TorchTotals[] = [];
  for (const line of stdout.split("\n")) {
    if (!line.startsWith(TOTALS_TAG)) continue;
    try {
      const v = JSON.parse(line.slice(TOTALS_TAG.length)) as TorchTotals;
      if (typeof v.pid === "number" && v.devices && typeof v.devices === "object") out.push(v);
    } catch {
      // a line cut short (the program killed while printing) is no figure
    }
  }
  return out;
}

/** Lines that differ from run to run by nature: timings that libraries print (the Trainer's
 *  train_runtime and …_per_second), and the totals line (it carries a pid; compared on its own). */
const VARIABLE = /^TORCH_TOTALS |train_runtime|_per_second\b/;

/** The lines of an output that must be the same with and without the agent. */
export function comparable(stdout: string): string[] {
  return stdout
    .split("\n")
    .map((l) => l.trimEnd())
    .filter((l) => l !== "" && !VARIABLE.test(l));
}

/** A line with its numbers taken out: what is left when only the output's shape can be compared. */
export const shape = (line: string) => line.replace(/[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?/gi, "#");

export type CompareMode = "exact" | "structure";

export interface OutputVerdict {
  mode: CompareMode;
  /** Line for line the same (after `comparable`). */
  same: boolean;
  /** The same with every number taken out. */
  structure_same: boolean;
  /** Where they first part, 1-based among the compared lines. */
  first_difference: { line: number; plain: string | null; agent: string | null } | null;
  lines: number;
}

export function compareOutputs(plain: string, agent: string, mode: CompareMode): OutputVerdict {
  const a = comparable(plain);
  const b = comparable(agent);
  let first: OutputVerdict["first_difference"] = null;
  for (let i = 0; i < Math.max(a.length, b.length); i++) {
    if (a[i] !== b[i]) {
      first = { line: i + 1, plain: a[i] ?? null, agent: b[i] ?? null };
      break;
    }
  }
  const structureSame = a.length === b.length && a.every((l, i) => shape(l) === shape(b[i]!));
  return { mode, same: first === null, structure_same: structureSame, first_difference: first, lines: a.length };
}

/** What marks a line as ours: the agent's and the monitor's prefixes, a frame in the agent's files,
 *  the hook's library. Not a bare "gpumem": the checkout's own path (…/gpumem-tui/test/gpu/zoo/x.py)
 *  is in the program's warnings with or without the agent. */
const OURS = /gpumem[-_]agent|gpumem-tui:|gpumem_hook|libgpumem/i;

/** stderr lines of the agent run that come from us (a traceback through our files included) and
 *  that the plain run did not print too. */
export function ourLines(stderr: string, plainStderr = ""): string[] {
  const plain = new Set(plainStderr.split("\n").map(shape));
  return stderr.split("\n").filter((l) => OURS.test(l) && !plain.has(shape(l)));
}

/** Lines of the agent run's stderr that the plain run's lacks (numbers aside): what else changed. */
export function extraLines(plain: string, agent: string): string[] {
  const seen = new Set(plain.split("\n").map(shape));
  return agent.split("\n").filter((l) => l.trim() !== "" && !seen.has(shape(l)));
}

/** The warnings (`…Warning: …` lines) only the agent run's stderr has. */
export function gainedWarnings(plain: string, agent: string): string[] {
  return extraLines(plain, agent).filter((l) => /\w*Warning: /.test(l));
}

// ---- what the monitor wrote ---------------------------------------------------------------------------

/** `run --json`'s last document (the one carrying the program's exit status), else the last one. */
export function finalDocument(docs: Document[]): Document | null {
  for (let i = docs.length - 1; i >= 0; i--) if (docs[i]!.program) return docs[i]!;
  return docs.at(-1) ?? null;
}

type Row = Document["processes"][number];
const agentPid = (r: Row) => r.agent_pid ?? r.pid;
const ours = (d: Document | null) => (d?.processes ?? []).filter((r) => r.pytorch);

export interface TotalsCompared {
  pid: number;
  rank: number | null;
  device: number;
  torch_allocated: number;
  ours_allocated: number | null;
  torch_reserved: number;
  ours_reserved: number | null;
  equal: boolean;
}

/** torch's own totals at the end beside the final document's, process by process and device by
 *  device (the CUDA index as the process numbers it). A device torch counts memory on with no row in
 *  the document, and a row of ours holding memory where torch printed nothing, are problems too. */
export function compareTotals(torch: TorchTotals[], doc: Document | null): { rows: TotalsCompared[]; problems: string[] } {
  const rows: TotalsCompared[] = [];
  const problems: string[] = [];
  if (!doc) problems.push("no document from the monitor");
  if (!torch.length) problems.push("no TORCH_TOTALS line: the program did not reach its end");
  const mine = ours(doc);
  for (const t of torch) {
    for (const [dev, v] of Object.entries(t.devices)) {
      const device = Number(dev);
      const r = mine.find((x) => agentPid(x) === t.pid && x.pytorch!.device === device);
      const row: TotalsCompared = {
        pid: t.pid,
        rank: t.rank,
        device,
        torch_allocated: v.allocated,
        ours_allocated: r ? r.pytorch!.allocated_bytes : null,
        torch_reserved: v.reserved,
        ours_reserved: r ? r.pytorch!.reserved_bytes : null,
        equal: !!r && r.pytorch!.allocated_bytes === v.allocated && r.pytorch!.reserved_bytes === v.reserved,
      };
      rows.push(row);
      if (doc && !r) problems.push(`pid ${t.pid} cuda:${device}: torch holds ${v.allocated} allocated / ${v.reserved} reserved, the document has no row`);
      else if (r && !row.equal) problems.push(`pid ${t.pid} cuda:${device}: allocated torch ${v.allocated} ours ${row.ours_allocated}; reserved torch ${v.reserved} ours ${row.ours_reserved}`);
    }
  }
  const printed = new Set(torch.map((t) => t.pid));
  for (const r of mine) {
    const p = r.pytorch!;
    if (printed.has(agentPid(r)) || (p.allocated_bytes === 0 && p.reserved_bytes === 0)) continue;
    problems.push(`pid ${agentPid(r)} cuda:${p.device}: the document has ${p.allocated_bytes} allocated / ${p.reserved_bytes} reserved, torch printed no totals for it`);
  }
  return { rows, problems };
}

export interface FindingSeen {
  id: string;
  severity: string;
  title: string;
  /** In the final document (else only in documents while it ran). */
  in_final: boolean;
}

const RANK: Record<string, number> = { error: 0, warning: 1, info: 2 };

/** Every finding any document carried, once per id at its most severe. */
export function findingsOf(docs: Document[]): FindingSeen[] {
  const inFinal = new Set(ours(finalDocument(docs)).flatMap((r) => (r.pytorch!.profile?.findings ?? []).map((f) => f.id)));
  const byId = new Map<string, FindingSeen>();
  for (const d of docs) {
    for (const r of ours(d)) {
      for (const f of r.pytorch!.profile?.findings ?? []) {
        const prev = byId.get(f.id);
        if (!prev || (RANK[f.severity] ?? 9) < (RANK[prev.severity] ?? 9)) byId.set(f.id, { id: f.id, severity: f.severity, title: f.title, in_final: inFinal.has(f.id) });
      }
    }
  }
  return [...byId.values()].sort((a, b) => (RANK[a.severity] ?? 9) - (RANK[b.severity] ?? 9) || a.id.localeCompare(b.id));
}

/** Warnings and errors that should not be there, and expected findings that are not. */
export function judgeFindings(found: FindingSeen[], expect: string[], allow: string[] = []): { false_warnings: string[]; missing: string[] } {
  const loud = found.filter((f) => f.severity !== "info");
  return {
    false_warnings: loud.filter((f) => !expect.includes(f.id) && !allow.includes(f.id)).map((f) => `${f.id} (${f.severity}${f.in_final ? "" : ", mid-run only"}): ${f.title}`),
    missing: expect.filter((id) => !loud.some((f) => f.id === id)),
  };
}

export interface DetailSeen {
  partial: boolean;
  causes: string[];
  lost_records: number;
  sync_checks: number;
  sync_disagreed: number;
}

/** The final document's block detail over every process of ours: partial where any is. */
export function detailOf(doc: Document | null): DetailSeen {
  const d: DetailSeen = { partial: false, causes: [], lost_records: 0, sync_checks: 0, sync_disagreed: 0 };
  for (const r of ours(doc)) {
    const x = r.pytorch!.profile?.detail;
    if (!x) continue;
    if (x.partial) d.partial = true;
    for (const c of x.causes) d.causes.push(`pid ${agentPid(r)} cuda:${r.pytorch!.device}: ${c}`);
    d.lost_records += x.lost_records;
    d.sync_checks += x.sync_checks;
    d.sync_disagreed += x.sync_disagreed;
  }
  return d;
}

/** The agent's manifests as the runner kept them (GPUMEM_TUI_KEEP=1), read loosely: any JSON object. */
export type ManifestSeen = { pid?: unknown; notes?: unknown; hook_mode?: unknown; hook_error?: unknown };

/** What the agents ran without ("pid N: feature: sentence"): the manifests' `notes`, and the same
 *  said anywhere in a document's process rows (wherever a later schema puts it). */
export function notesOf(manifests: ManifestSeen[], doc: Document | null): string[] {
  const out = new Set<string>();
  const add = (pid: unknown, notes: unknown) => {
    if (notes && typeof notes === "object" && !Array.isArray(notes)) for (const [k, v] of Object.entries(notes)) out.add(`pid ${pid}: ${k}: ${String(v)}`);
    else if (Array.isArray(notes)) for (const n of notes) out.add(`pid ${pid}: ${typeof n === "string" ? n : JSON.stringify(n)}`);
  };
  for (const m of manifests) add(m.pid, m.notes);
  for (const r of doc?.processes ?? []) {
    const loose = r as unknown as { notes?: unknown; pytorch?: { notes?: unknown } | null };
    add(agentPid(r), loose.notes);
    add(agentPid(r), loose.pytorch?.notes);
  }
  return [...out];
}

/** Hook modes other than "hook" (the agent fell back to polling, and why). */
export function hookModes(manifests: ManifestSeen[]): string[] {
  return manifests.filter((m) => m.hook_mode !== "hook").map((m) => `pid ${m.pid}: ${String(m.hook_mode)}${m.hook_error ? ` (${String(m.hook_error)})` : ""}`);
}

// ---- a set-up and its row -------------------------------------------------------------------------------

export interface Setup {
  id: string;
  title: string;
  /** The program and its arguments, after `python` (or after torchrun's own options). */
  program: string[];
  launch: "python" | "torchrun";
  /** one GPU; every GPU (torchrun's ranks); two GPUs in one process (skipped with fewer). */
  gpus: "one" | "all" | "two";
  /** The option that takes the number of steps, and its number at --scale 1. */
  steps?: [flag: string, n: number];
  env?: Record<string, string>;
  /** Warnings or errors that must be found (a leak is one); others that may be. */
  expect?: string[];
  allow?: string[];
  compare?: CompareMode;
  /** Why an output may differ run to run (said in the report where compare is "structure"). */
  why?: string;
  /** The plain run first, then the agent's (never side by side): for a set-up that takes the GPU. */
  serial?: boolean;
  /** Python modules it needs beyond torch; a missing one skips it, visibly. */
  needs?: string[];
  /** Seconds each run may take. */
  timeoutS: number;
  /** Seconds it is expected to take (the longest start first). */
  estimateS: number;
}

export interface RunOutcome {
  /** The exit status, a signal's name, or null when it never started. */
  exit: number | string | null;
  timed_out: boolean;
  /** Stopped because the zoo's budget ran out, not the set-up's own limit. */
  stopped_by_budget?: boolean;
  seconds: number;
  command: string;
}

export interface ZooRow {
  id: string;
  title: string;
  status: "PASS" | "FAIL" | "SKIP";
  failures: string[];
  skipped?: string;
  devices: string;
  plain: RunOutcome | null;
  agent: RunOutcome | null;
  output: OutputVerdict | null;
  why_nondeterministic?: string;
  totals: TotalsCompared[];
  totals_problems: string[];
  torch_same_without_agent: boolean | null;
  findings: FindingSeen[];
  false_warnings: string[];
  expected_missing: string[];
  notes: string[];
  hook_modes: string[];
  detail: DetailSeen | null;
  our_stderr: string[];
  extra_stderr: string[];
  document_warnings: string[];
  documents: number;
}

export function skippedRow(s: Setup, why: string, devices = ""): ZooRow {
  return { id: s.id, title: s.title, status: "SKIP", failures: [], skipped: why, devices, plain: null, agent: null, output: null, totals: [], totals_problems: [], torch_same_without_agent: null, findings: [], false_warnings: [], expected_missing: [], notes: [], hook_modes: [], detail: null, our_stderr: [], extra_stderr: [], document_warnings: [], documents: 0 };
}

/** torch's own totals with and without the agent, processes matched by rank then order. */
function sameTorch(a: TorchTotals[], b: TorchTotals[]): boolean | null {
  if (!a.length || !b.length) return null;
  const key = (t: TorchTotals[]) => JSON.stringify([...t].sort((x, y) => (x.rank ?? -1) - (y.rank ?? -1)).map((x) => x.devices));
  return key(a) === key(b);
}

export interface RunEvidence {
  outcome: RunOutcome;
  stdout: string;
  stderr: string;
}

/** The verdict on one set-up from what its two runs left. */
export function judge(s: Setup, devices: string, plain: RunEvidence, agent: RunEvidence, docs: Document[], manifests: ManifestSeen[]): ZooRow {
  const mode = s.compare ?? "exact";
  const output = compareOutputs(plain.stdout, agent.stdout, mode);
  const fin = finalDocument(docs);
  const torchAgent = parseTotals(agent.stdout);
  const totals = compareTotals(torchAgent, fin);
  const findings = findingsOf(docs);
  const fj = judgeFindings(findings, s.expect ?? [], s.allow ?? []);
  const detail = detailOf(fin);
  const notes = notesOf(manifests, fin);
  const mine = ourLines(agent.stderr, plain.stderr);
  const failures: string[] = [];
  const ex = (o: RunOutcome) => (o.stopped_by_budget ? `${o.exit} (stopped after ${Math.round(o.seconds)} s: the zoo's --budget ran out)` : o.timed_out ? `${o.exit} (killed at its ${s.timeoutS} s limit)` : String(o.exit));
  if (plain.outcome.exit !== 0) failures.push(`the plain run exited ${ex(plain.outcome)}: the set-up itself fails, nothing is known of the agent`);
  if (agent.outcome.exit !== 0) failures.push(`under the agent it exited ${ex(agent.outcome)}`);
  else if (plain.outcome.exit !== agent.outcome.exit) failures.push(`exit status ${ex(plain.outcome)} plain, ${ex(agent.outcome)} under the agent`);
  if (mode === "exact" && !output.same) failures.push(`the output differs from line ${output.first_difference!.line}: plain ${JSON.stringify(output.first_difference!.plain)}, agent ${JSON.stringify(output.first_difference!.agent)}`);
  if (mode === "structure" && !output.structure_same) failures.push(`the output's shape differs from line ${output.first_difference?.line}`);
  if (mine.length) failures.push(`stderr has ${mine.length} line(s) of ours: ${mine[0]!.trim().slice(0, 300)}`);
  // A warning the program's stderr gains only under the agent is a change of its output too (torch.compile
  // warned of "global hooks on modules" while ours were on).
  const warned = gainedWarnings(plain.stderr, agent.stderr);
  if (warned.length) failures.push(`stderr gained ${warned.length} warning(s) under the agent: ${warned[0]!.trim().slice(0, 300)}`);
  failures.push(...totals.problems);
  failures.push(...fj.false_warnings.map((w) => `false warning: ${w}`));
  failures.push(...fj.missing.map((id) => `expected finding missing: ${id}`));
  if (notes.length) failures.push(`notes (features turned off): ${notes.join("; ")}`);
  if (detail.partial) failures.push(`detail partial: ${detail.causes.join("; ") || "no cause given"}`);
  if (fin && !fin.program) failures.push("no final document (the one carrying the program's exit status)");
  return {
    id: s.id,
    title: s.title,
    status: failures.length ? "FAIL" : "PASS",
    failures,
    devices,
    plain: plain.outcome,
    agent: agent.outcome,
    output,
    ...(mode === "structure" && s.why ? { why_nondeterministic: s.why } : {}),
    totals: totals.rows,
    totals_problems: totals.problems,
    torch_same_without_agent: sameTorch(parseTotals(plain.stdout), torchAgent),
    findings,
    false_warnings: fj.false_warnings,
    expected_missing: fj.missing,
    notes,
    hook_modes: hookModes(manifests),
    detail: fin ? detail : null,
    our_stderr: mine.slice(0, 20),
    extra_stderr: extraLines(plain.stderr, agent.stderr).slice(0, 20),
    document_warnings: [...new Set(docs.flatMap((d) => d.warnings ?? []))].slice(0, 20),
    documents: docs.length,
  };
}

// ---- the report ------------------------------------------------------------------------------------------

const mib = (b: number) => `${(b / 2 ** 20).toFixed(1)} MiB`;
const cell = (s: string) => s.replaceAll("|", "\\|").replaceAll("\n", " ");

function exitCell(r: ZooRow): string {
  const e = (o: RunOutcome | null) => (o === null ? "–" : o.stopped_by_budget ? `out of budget (${o.exit})` : o.timed_out ? `timeout (${o.exit})` : String(o.exit));
  return `${e(r.plain)} / ${e(r.agent)}`;
}

function outputCell(r: ZooRow): string {
  const o = r.output;
  if (!o) return "–";
  if (o.same) return `same (${o.lines} lines)`;
  const where = `differs at line ${o.first_difference!.line}`;
  return o.structure_same ? `${where}, shape same${o.mode === "structure" ? " (compared by shape)" : ""}` : `**${where}**`;
}

function totalsCell(r: ZooRow, which: "allocated" | "reserved"): string {
  if (r.status === "SKIP") return "–";
  if (!r.totals.length) return r.totals_problems.length ? `**${r.totals_problems[0]}**` : "–";
  return r.totals
    .map((t) => {
      const a = which === "allocated" ? t.torch_allocated : t.torch_reserved;
      const b = which === "allocated" ? t.ours_allocated : t.ours_reserved;
      const who = `${t.rank !== null ? `r${t.rank} ` : ""}cuda:${t.device}`;
      return a === b ? `${who} ${mib(a)} =` : `**${who} ${mib(a)} ≠ ${b === null ? "none" : mib(b)}**`;
    })
    .join("<br>");
}

function findingsCell(r: ZooRow): string {
  if (r.status === "SKIP") return "–";
  const loud = r.findings.filter((f) => f.severity !== "info");
  const info = r.findings.length - loud.length;
  const parts = loud.map((f) => (r.false_warnings.some((w) => w.startsWith(`${f.id} `)) ? `**${f.id} (${f.severity}, false)**` : `${f.id} (${f.severity})`));
  for (const m of r.expected_missing) parts.push(`**${m} missing**`);
  if (info) parts.push(`${info} info`);
  return parts.join(", ") || "none";
}

function wallCell(r: ZooRow): string {
  const w = (o: RunOutcome | null) => (o ? `${o.seconds.toFixed(1)} s` : "–");
  return `${w(r.plain)} / ${w(r.agent)}`;
}

export function markdown(rep: { command: string; machine: Record<string, unknown>; rows: ZooRow[]; notes: string[] }): string {
  const rows = rep.rows;
  const pass = rows.filter((r) => r.status === "PASS").length;
  const fail = rows.filter((r) => r.status === "FAIL").length;
  const md = [
    "# The zoo: real set-ups with and without the agent",
    "",
    `\`${rep.command}\``,
    "",
    `${Object.entries(rep.machine).map(([k, v]) => `${k}: ${Array.isArray(v) ? v.join("; ") : String(v)}`).join(" · ")}`,
    "",
    `**${pass} passed, ${fail} failed, ${rows.length - pass - fail} skipped** of ${rows.length} set-ups.`,
    "",
    "| set-up | result | exit plain / agent | output | allocated torch = ours | reserved torch = ours | torch same w/o agent | findings | notes | partial | wall plain / agent |",
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
  ];
  for (const r of rows) {
    const result = r.status === "SKIP" ? `SKIP: ${r.skipped}` : r.status === "PASS" ? "PASS" : "**FAIL**";
    const partial = r.detail ? (r.detail.partial ? "**yes**" : "no") : "–";
    const same = r.torch_same_without_agent === null ? "–" : r.torch_same_without_agent ? "yes" : "no";
    const notes = r.status === "SKIP" ? "–" : r.notes.length ? `**${r.notes.join("; ")}**` : "none";
    md.push(`| ${cell(`${r.id}: ${r.title}`)} | ${cell(result)} | ${exitCell(r)} | ${cell(outputCell(r))} | ${cell(totalsCell(r, "allocated"))} | ${cell(totalsCell(r, "reserved"))} | ${same} | ${cell(findingsCell(r))} | ${cell(notes)} | ${partial} | ${wallCell(r)} |`);
  }
  md.push("", ...rep.notes.map((n) => `- ${n}`), "");
  for (const r of rows) {
    md.push(`## ${r.id}: ${r.status}`, "", r.title, "");
    if (r.skipped) md.push(`Skipped: ${r.skipped}`, "");
    if (r.devices) md.push(`- CUDA_VISIBLE_DEVICES=${r.devices}`);
    for (const [k, o] of [["plain", r.plain], ["agent", r.agent]] as const) if (o) md.push(`- ${k}: \`${o.command}\` → exit ${o.exit}${o.timed_out ? " (timed out)" : ""} in ${o.seconds.toFixed(1)} s`);
    for (const f of r.failures) md.push(`- **failed**: ${f}`);
    if (r.why_nondeterministic) md.push(`- compared by shape only: ${r.why_nondeterministic}`);
    if (r.detail) md.push(`- detail: partial ${r.detail.partial}, ${r.detail.lost_records} records lost, ${r.detail.sync_checks} sync checks against torch, ${r.detail.sync_disagreed} disagreed; ${r.documents} documents`);
    for (const t of r.totals) md.push(`- pid ${t.pid}${t.rank !== null ? ` rank ${t.rank}` : ""} cuda:${t.device}: allocated torch ${t.torch_allocated} ours ${t.ours_allocated ?? "none"}; reserved torch ${t.torch_reserved} ours ${t.ours_reserved ?? "none"}`);
    for (const f of r.findings) md.push(`- finding ${f.id} (${f.severity}${f.in_final ? "" : ", mid-run only"}): ${f.title}`);
    for (const h of r.hook_modes) md.push(`- hook mode: ${h}`);
    for (const w of r.document_warnings) md.push(`- document warning: ${w}`);
    if (r.our_stderr.length) md.push("- stderr lines of ours:", "```", ...r.our_stderr, "```");
    if (r.extra_stderr.length) md.push("- stderr lines only under the agent (numbers aside):", "```", ...r.extra_stderr, "```");
    md.push("");
  }
  return md.join("\n");
}

// ---- running ------------------------------------------------------------------------------------------------

const SETSID = Bun.which("setsid");
const LIVE = new Set<number>();

/** A command run to its end or stopped at its deadline: SIGTERM to its whole process group (torchrun's
 *  ranks, `run`'s program), SIGKILL 10 s later. stdout and stderr into files. */
export async function spawnBounded(argv: string[], o: { env: Record<string, string>; cwd: string; timeoutMs: number; stdout: string; stderr: string }): Promise<{ exit: number | string | null; timed_out: boolean; seconds: number }> {
  const t0 = performance.now();
  const [out, err] = [openSync(o.stdout, "w", 0o600), openSync(o.stderr, "w", 0o600)];
  let proc: Bun.Subprocess;
  try {
    proc = Bun.spawn(SETSID ? [SETSID, "-w", ...argv] : argv, { cwd: o.cwd, env: o.env, stdin: "ignore", stdout: out, stderr: err });
  } catch (e) {
    closeSync(out);
    closeSync(err);
    writeFileSync(o.stderr, `could not start ${argv[0]}: ${(e as Error).message}\n`);
    return { exit: null, timed_out: false, seconds: 0 };
  }
  LIVE.add(proc.pid);
  const group = (sig: NodeJS.Signals) => {
    try {
      process.kill(SETSID ? -proc.pid : proc.pid, sig);
    } catch {
      // gone
    }
  };
  let timedOut = false;
  let hard: Timer | undefined;
  const timer = setTimeout(() => {
    timedOut = true;
    group("SIGTERM");
    hard = setTimeout(() => group("SIGKILL"), 10_000);
  }, Math.max(1, o.timeoutMs));
  const code = await proc.exited;
  clearTimeout(timer);
  clearTimeout(hard);
  // Whatever of its group is left (a rank torchrun did not reap) goes with it.
  if (SETSID) group("SIGKILL");
  LIVE.delete(proc.pid);
  closeSync(out);
  closeSync(err);
  const exit = proc.signalCode ?? code;
  return { exit, timed_out: timedOut, seconds: +((performance.now() - t0) / 1000).toFixed(1) };
}

/** Every run still going: its whole group killed (the harness itself was interrupted). */
export function killAll(): void {
  for (const pid of LIVE) {
    try {
      process.kill(SETSID ? -pid : pid, "SIGKILL");
    } catch {
      // gone
    }
  }
}

export function readTail(path: string, max = 256 * 1024): string {
  try {
    const t = readFileSync(path, "utf8");
    return t.length > max ? `[… ${t.length - max} characters before]\n${t.slice(-max)}` : t;
  } catch {
    return "";
  }
}

export function readDocs(path: string): Document[] {
  const out: Document[] = [];
  let text = "";
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return out;
  }
  for (const l of text.split("\n")) {
    if (!l.trim()) continue;
    try {
      out.push(JSON.parse(l) as Document);
    } catch {
      // a line being written when the run was killed
    }
  }
  return out;
}

export function readManifests(dir: string): ManifestSeen[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => /^\d+\.json$/.test(f))
    .flatMap((f) => {
      try {
        return [JSON.parse(readFileSync(join(dir, f), "utf8")) as ManifestSeen];
      } catch {
        return [];
      }
    });
}

const quote = (s: string) => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replaceAll("'", `'\\''`)}'`);
export const shell = (argv: string[], env: Record<string, string> = {}) => [...Object.entries(env).map(([k, v]) => `${k}=${quote(v)}`), ...argv.map(quote)].join(" ");

export interface ZooContext {
  python: string;
  /** How `gpumem-tui` is started: [bun, src/cli.ts]. */
  cli: string[];
  root: string;
  /** Where each run's files go while it runs. */
  work: string;
  /** Where the kept outputs go (OUT/runs). */
  runs: string;
  /** The environment every run starts from. */
  env: Record<string, string>;
  /** NVML's indexes of the GPUs to use. */
  gpus: number[];
  scale: number;
  /** Unix ms by which every run must have ended. */
  deadline: number;
  serial: boolean;
  /** Modules that failed to import (a set-up needing one is skipped). */
  missingModules: Set<string>;
  /** Awaited before the first run under the agent (the hook, built once). */
  beforeAgent: Promise<unknown>;
  log: (msg: string) => void;
}

/** The command of one set-up's program on `devices`, as a user types it (no agent). */
export function programArgv(s: Setup, ctx: Pick<ZooContext, "python" | "root" | "scale">, nGpus: number): string[] {
  const prog = [join(ctx.root, s.program[0]!), ...s.program.slice(1)];
  if (s.steps) prog.push(s.steps[0], String(Math.max(1, Math.round(s.steps[1] * ctx.scale))));
  if (s.launch === "torchrun") return [ctx.python, "-m", "torch.distributed.run", "--standalone", `--nproc-per-node=${nGpus}`, ...prog];
  return [ctx.python, ...prog];
}

/** One set-up: both runs, their outputs kept, the verdict. Never throws: a failure is its row. */
export async function runSetup(s: Setup, devices: number[], ctx: ZooContext): Promise<ZooRow> {
  const visible = devices.join(",");
  const missing = (s.needs ?? []).filter((m) => ctx.missingModules.has(m));
  if (missing.length) return skippedRow(s, `no ${missing.join(", ")} in this Python`, visible);
  if (s.gpus === "two" && devices.length < 2) return skippedRow(s, `needs two GPUs, this machine has ${devices.length}`, visible);
  const left = ctx.deadline - Date.now();
  if (left < Math.min(s.estimateS * 1000, 60_000)) return skippedRow(s, `out of time: ${Math.round(left / 1000)} s left of the budget, about ${s.estimateS} s needed`, visible);
  try {
    const base = join(ctx.work, s.id);
    const agents = join(base, "agents");
    for (const d of ["plain/tmp", "plain/inductor", "agent/tmp", "agent/inductor"]) mkdirSync(join(base, d), { recursive: true });
    mkdirSync(agents, { recursive: true, mode: 0o700 });
    const argv = programArgv(s, ctx, devices.length);
    // Each run its own temp and compile caches: both compile from cold, neither reads the other's.
    const envOf = (mode: string): Record<string, string> => ({ ...ctx.env, ...s.env, CUDA_VISIBLE_DEVICES: visible, TMPDIR: join(base, mode, "tmp"), TORCHINDUCTOR_CACHE_DIR: join(base, mode, "inductor"), TRITON_CACHE_DIR: join(base, mode, "inductor", "triton") });
    const ndjson = join(base, "agent", "run.ndjson");
    const agentArgv = [...ctx.cli, "run", "--json", "--output", ndjson, "--", ...argv];
    // The agent's files in a directory of this run's own (other set-ups run beside it), kept at exit
    // for their manifests' notes.
    const agentEnv = { ...envOf("agent"), GPUMEM_TUI_DIR: agents, GPUMEM_TUI_KEEP: "1" };
    const shown = (mode: "plain" | "agent") => shell(mode === "plain" ? argv : agentArgv, { CUDA_VISIBLE_DEVICES: visible, ...s.env, ...(mode === "agent" ? { GPUMEM_TUI_DIR: agents, GPUMEM_TUI_KEEP: "1" } : {}) });
    const go = async (mode: "plain" | "agent"): Promise<RunEvidence> => {
      if (mode === "agent") await ctx.beforeAgent;
      const files = { stdout: join(base, mode, "stdout.txt"), stderr: join(base, mode, "stderr.txt") };
      ctx.log(`[${s.id}] ${mode}: ${shown(mode)}`);
      // Bounded by the set-up's own limit and by the zoo's budget, whichever comes first.
      const byBudget = ctx.deadline - Date.now() < s.timeoutS * 1000;
      const timeoutMs = Math.max(5_000, Math.min(s.timeoutS * 1000, ctx.deadline - Date.now()));
      const r = await spawnBounded(mode === "plain" ? argv : agentArgv, { env: mode === "plain" ? envOf("plain") : agentEnv, cwd: ctx.root, timeoutMs, ...files });
      ctx.log(`[${s.id}] ${mode}: exit ${r.exit}${r.timed_out ? " (timed out)" : ""} in ${r.seconds} s`);
      return { outcome: { ...r, stopped_by_budget: r.timed_out && byBudget, command: shown(mode) }, stdout: readTail(files.stdout, 4 << 20), stderr: readTail(files.stderr, 4 << 20) };
    };
    const [plain, agent] = s.serial || ctx.serial ? [await go("plain"), await go("agent")] : await Promise.all([go("plain"), go("agent")]);
    const docs = readDocs(ndjson);
    const manifests = readManifests(agents);
    // What is kept for reading: each run's output, the final document, the manifests.
    for (const mode of ["plain", "agent"]) {
      writeFileSync(join(ctx.runs, `${s.id}.${mode}.stdout.txt`), readTail(join(base, mode, "stdout.txt")));
      writeFileSync(join(ctx.runs, `${s.id}.${mode}.stderr.txt`), readTail(join(base, mode, "stderr.txt")));
    }
    const fin = finalDocument(docs);
    writeFileSync(join(ctx.runs, `${s.id}.agent.final.json`), `${JSON.stringify(fin, null, 1)}\n`);
    writeFileSync(join(ctx.runs, `${s.id}.agent.ndjson-tail`), readTail(ndjson, 512 * 1024));
    writeFileSync(join(ctx.runs, `${s.id}.agent.manifests.json`), `${JSON.stringify(manifests, null, 1)}\n`);
    return judge(s, visible, plain, agent, docs, manifests);
  } catch (e) {
    const row = skippedRow(s, "", visible);
    return { ...row, status: "FAIL", skipped: undefined, failures: [`the harness failed on this set-up: ${(e as Error).message}`] };
  }
}

/** Every set-up: those on several GPUs one at a time with the machine to themselves, then the rest,
 *  one set-up per GPU at a time (its two runs side by side on that GPU), longest first. `onRow` is
 *  called as each ends (the report is rewritten then: an interrupted zoo leaves what it did). */
export async function runZoo(setups: Setup[], ctx: ZooContext, onRow: (r: ZooRow) => void): Promise<ZooRow[]> {
  const rows = new Map<string, ZooRow>();
  const done = (r: ZooRow) => {
    rows.set(r.id, r);
    ctx.log(`[${r.id}] ${r.status}${r.skipped ? `: ${r.skipped}` : ""}${r.failures.length ? `: ${r.failures[0]}` : ""}`);
    onRow(r);
  };
  for (const s of setups.filter((x) => x.gpus !== "one")) done(await runSetup(s, ctx.gpus, ctx));
  const queue = setups.filter((x) => x.gpus === "one").sort((a, b) => b.estimateS - a.estimateS);
  await Promise.all(
    ctx.gpus.map(async (g) => {
      for (let s = queue.shift(); s; s = queue.shift()) done(await runSetup(s, [g], ctx));
    }),
  );
  return setups.map((s) => rows.get(s.id)!);
}
