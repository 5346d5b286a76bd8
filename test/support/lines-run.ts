// The recordings of test/agent/lines_run.py (issue 37's programs on the doubles, stacks on by default): the
// real agent and the hook's walker on this machine's CPython, the ring saved, and where each of the
// program's `line:NAME` marks is, as a frame names it ("path:line function" less the function).
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, MAX_STEPS, replayToEnd } from "../../src/profiler";
import { recordFields } from "../../src/system/manifest";
import { buildLibrary } from "./native";

const ROOT = join(import.meta.dir, "..", "..");
export const LINES_RUN = join(ROOT, "test", "agent", "lines_run.py");
/** The torch double's file: library code, as torch's own would be (GPUMEM_TUI_LIBRARY). */
export const TORCH_DOUBLE = join(ROOT, "test", "agent", "torch_double.py");
const CLI = join(ROOT, "src", "cli.ts");

/** "…/lines_run.py:55" for the line marked `line:name`. */
export function markedAt(name: string): string {
  const i = readFileSync(LINES_RUN, "utf8")
    .split("\n")
    .findIndex((l) => l.includes(`# line:${name}`));
  if (i < 0) throw new Error(`lines_run.py has no line:${name}`);
  return `${LINES_RUN}:${i + 1}`;
}

const made: string[] = [];

/** Remove what recordLines made (a test file's afterAll). */
export function cleanLines(): void {
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
}

/** `scenario` run to its end (lines_run.py's options `args`): its saved ring (and manifest beside it). */
export function recordLines(scenario: "leak" | "nograd" | "oom", env: Record<string, string> = {}, args: string[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-lines-"));
  made.push(dir);
  const ring = join(dir, `${scenario}.ring`);
  const p = Bun.spawnSync(["python3", LINES_RUN, scenario, ring, ...args], {
    env: { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double"), GPUMEM_TUI_DIR: dir, GPUMEM_TUI_RING_CAPACITY: "4096", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  if (p.exitCode !== 0 || !/^records \d+/m.test(p.stdout.toString())) throw new Error(`lines_run.py ${scenario}: exit ${p.exitCode}\n${p.stdout}${p.stderr}`);
  return ring;
}

/** The CLI on `args` with the double as library code: status, stdout, stderr. */
export function cli(args: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync(["bun", CLI, ...args], { env: { ...process.env, GPUMEM_TUI_LIBRARY: TORCH_DOUBLE, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

/** `replay RING --json`'s final state. */
export function replayFinal(ring: string, env: Record<string, string> = {}) {
  const r = cli(["replay", ring, "--json"], env);
  if (r.code !== 0) throw new Error(`replay ${ring}: exit ${r.code}\n${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1)!) as { findings: { id: string; title: string; evidence: string; lines?: { role: string; at: string; bytes: number | null; blocks: number | null }[]; numbers: Record<string, unknown> }[] };
}

/** A saved ring played to its end into a model, as `replay` plays it (its manifest's stacks, the
 *  double as library code). */
export function modelOfLines(ring: string) {
  const before = process.env.GPUMEM_TUI_LIBRARY;
  process.env.GPUMEM_TUI_LIBRARY = TORCH_DOUBLE;
  try {
    const rec = openRingRecording(ring);
    const model = replayToEnd(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), stacks: rec.stacks, model: createModel().keepTrace().keepPeaks(MAX_STEPS) });
    rec.close();
    return model;
  } finally {
    if (before === undefined) delete process.env.GPUMEM_TUI_LIBRARY;
    else process.env.GPUMEM_TUI_LIBRARY = before;
  }
}
