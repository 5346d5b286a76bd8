// Opening a snapshot whose every trace entry carries frames: `gpumem-tui view FILE --json` against
// Python's `pickle.load` of the same file, each in its own process under /usr/bin/time -v (wall
// time and peak RSS), interleaved, in one run; with --baseline, the same command of another copy
// of the repository (the code before a change) interleaved with them.
//   bun bench/snapshot-frames.ts [OUT_DIR] [--entries N] [--runs N] [--baseline DIR]
// Two files, made by tools/snapshot-frames-gen.ts (a real H100 step repeated, frames on every
// entry) in the system's temporary directory and removed at the end, never committed: frame dicts
// shared as torch writes them, and a dict per frame per entry.
import { mkdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { writeFramesSnapshot } from "../tools/snapshot-frames-gen";
import { timeCommand } from "./support/time-command";

const args = process.argv.slice(2);
const flag = (name: string): string | undefined => {
  const i = args.indexOf(name);
  return i >= 0 ? args.splice(i, 2)[1] : undefined;
};
const entries = Number(flag("--entries") ?? 1_500_000);
const runs = Number(flag("--runs") ?? 2);
const baseline = flag("--baseline");
const outDir = args[0] ?? join(import.meta.dir, "results");
const cli = join(import.meta.dir, "..", "src", "cli.ts");

interface Run {
  wall_s: number;
  peak_rss_bytes: number;
  /** Why it failed, where it did (its first line of stderr). */
  error?: string;
  frames_in_json?: number;
}

/** One process under /usr/bin/time -v: wall seconds, peak RSS, its stdout; a failure is kept, not thrown. */
function timed(argv: string[]): Run & { stdout: string } {
  const r = timeCommand(argv);
  const run: Run & { stdout: string } = { wall_s: r.wall_s, peak_rss_bytes: r.peak_rss_kib * 1024, stdout: r.stdout };
  if (r.exitCode !== 0) run.error = r.stderr.split("\n").find((l) => l.trim() && !l.startsWith("\t") && !l.startsWith("Command"))?.trim() ?? `exit status ${r.exitCode}`;
  return run;
}

function view(root: string, file: string, expected: number): Run {
  const r = timed(["bun", join(root, "src", "cli.ts"), "view", file, "--json"]);
  if (r.error) return { wall_s: r.wall_s, peak_rss_bytes: r.peak_rss_bytes, error: r.error };
  const v = JSON.parse(r.stdout);
  if (v.trace.entries !== expected) throw new Error(`view counted ${v.trace.entries} trace entries, the file has ${expected}`);
  return { wall_s: r.wall_s, peak_rss_bytes: r.peak_rss_bytes, frames_in_json: Math.max(0, ...v.top_allocations.map((t: { frames: string[] }) => t.frames.length)) };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const summary = (rs: Run[], bytes: number, python: Run[]) => {
  const ok = rs.filter((r) => !r.error);
  if (ok.length === 0) return { runs: rs, failed: rs[0]!.error };
  const s = median(ok.map((r) => r.wall_s));
  const rss = Math.max(...ok.map((r) => r.peak_rss_bytes));
  return { runs: rs, median_s: s, peak_rss_bytes: rss, time_over_pickle_load: +(s / median(python.map((r) => r.wall_s))).toFixed(2), rss_over_file: +(rss / bytes).toFixed(2), frames_in_json: ok[0]!.frames_in_json };
};

const layouts = [
  { name: "shared", words: "frame dicts shared (as torch writes them)", fresh: false },
  { name: "fresh", words: "a dict per frame per entry", fresh: true },
];
const results = layouts.map((l) => {
  const file = join(tmpdir(), `gpumem-bench-frames-${l.name}-${entries}.pickle`);
  const gen = writeFramesSnapshot(file, entries, l.fresh);
  const bytes = statSync(file).size;
  const ours: Run[] = [];
  const before: Run[] = [];
  const python: Run[] = [];
  for (let i = 0; i < runs; i++) {
    ours.push(view(join(import.meta.dir, ".."), file, gen.entries));
    if (baseline) before.push(view(baseline, file, gen.entries));
    const p = timed(["python3", "-c", `import pickle, sys; d = pickle.load(open(sys.argv[1], 'rb')); assert len(d['device_traces'][0]) == ${gen.entries}`, file]);
    if (p.error) throw new Error(`pickle.load failed: ${p.error}`);
    python.push({ wall_s: p.wall_s, peak_rss_bytes: p.peak_rss_bytes });
  }
  rmSync(file, { force: true });
  return {
    layout: l.name,
    words: l.words,
    file_bytes: bytes,
    trace_entries: gen.entries,
    steps: gen.steps,
    annotations: gen.annotations,
    python_pickle_load: { runs: python, median_s: median(python.map((r) => r.wall_s)), peak_rss_bytes: Math.max(...python.map((r) => r.peak_rss_bytes)) },
    view_json: summary(ours, bytes, python),
    ...(baseline ? { view_json_baseline: summary(before, bytes, python) } : {}),
  };
});

const result = { date: new Date().toISOString(), machine: "2-core machine (shared)", command: `bun bench/snapshot-frames.ts --entries ${entries} --runs ${runs}${baseline ? " --baseline DIR" : ""}`, baseline: baseline ? "the repository at its last commit (git archive HEAD), the code before this change" : null, results };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "snapshot-frames.json"), `${JSON.stringify(result, null, 2)}\n`);

const mb = (b: number) => `${(b / 2 ** 20).toFixed(0)} MiB`;
const row = (label: string, s: ReturnType<typeof summary>) =>
  "failed" in s
    ? `| ${label} | failed: ${s.failed} | | | | | |`
    : `| ${label} | ${s.median_s!.toFixed(1)} s | ${s.time_over_pickle_load}× | ${mb(s.peak_rss_bytes!)} | ${s.rss_over_file}× | ${s.frames_in_json} | ${s.runs.map((r) => r.wall_s.toFixed(1)).join(", ")} |`;
const md = `# Opening a snapshot with frames on every entry

Command: \`${result.command}\` (${result.date}, the repository's 2-core machine, shared).
Each file: made by tools/snapshot-frames-gen.ts from test/fixtures/snapshots/stacks-python (its last
step repeated at the same addresses, as a training loop reuses them; the entries torch recorded
without frames take those of stacks-all's same entry), ${entries.toLocaleString("en")} trace entries, every one with frames.
Each command in its own process under \`/usr/bin/time -v\` (wall time includes start-up), interleaved, ${runs} runs.
${baseline ? "Before: the repository at its last commit (`git archive HEAD`), the same file, the same run.\n" : ""}
${results
  .map(
    (r) => `## ${r.words}: ${r.file_bytes.toLocaleString("en")} bytes

\`pickle.load\`: ${r.python_pickle_load.median_s.toFixed(1)} s (median), ${mb(r.python_pickle_load.peak_rss_bytes)} peak RSS.

| \`view --json\` | wall (median) | / pickle.load | peak RSS | / file | frames a top allocation lists | runs (s) |
| --- | ---: | ---: | ---: | ---: | ---: | --- |
${"view_json_baseline" in r && r.view_json_baseline ? `${row("before", r.view_json_baseline)}\n` : ""}${row(baseline ? "after" : "this code", r.view_json)}
`,
  )
  .join("\n")}
Targets: peak RSS at most the file's size (1×) and at most half of pickle.load's time (0.5×), frames shown.
`;
writeFileSync(join(outDir, "snapshot-frames.md"), md);
console.log(md);
