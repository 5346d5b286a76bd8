// One command in a process of its own under GNU time (`/usr/bin/time -v`): its wall time and peak
// resident memory as time reports them, its exit status and what it printed. Its output goes to
// files, not pipes: a document of a few MB through Bun.spawnSync's pipes came back cut at times.
// Used by the benchmarks that compare opening a snapshot with Python's pickle.load.
import { readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface TimedCommand {
  wall_s: number;
  peak_rss_kib: number;
  exitCode: number | null;
  stdout: string;
  /** The command's own stderr, then time's report. */
  stderr: string;
}

export function timeCommand(argv: string[]): TimedCommand {
  const out = join(tmpdir(), `gpumem-bench-${process.pid}.out`);
  const errPath = join(tmpdir(), `gpumem-bench-${process.pid}.err`);
  const p = Bun.spawnSync(["/usr/bin/time", "-v", ...argv], { stdout: Bun.file(out), stderr: Bun.file(errPath) });
  const stderr = readFileSync(errPath, "utf8");
  const stdout = readFileSync(out, "utf8");
  rmSync(out, { force: true });
  rmSync(errPath, { force: true });
  // time reports these even where the command failed or could not start.
  const wall = /Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (?:(\d+):)?(\d+):([\d.]+)/.exec(stderr)!;
  const rss = /Maximum resident set size \(kbytes\): (\d+)/.exec(stderr)!;
  return { wall_s: Number(wall[1] ?? 0) * 3600 + Number(wall[2]) * 60 + Number(wall[3]), peak_rss_kib: Number(rss[1]), exitCode: p.exitCode, stdout, stderr };
}
