// Running the command line on a hostile file: its exit status, what it said, how long it took and
// the most memory it held, so that a test can hold a parser to one line, bounded time and memory.
import { expect } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const CLI = `${import.meta.dir}/../../src/cli.ts`;
let tmp = "";
let runs = 0;
/** Made again where the run's folder (test/support/tmp.ts) no longer holds it: a worker that keeps
 *  its modules across files (--no-isolate) removes that folder after each file. */
const rssDir = () => (tmp && existsSync(tmp) ? tmp : (tmp = mkdtempSync(join(tmpdir(), "gpumem-rss-"))));

export interface Outcome {
  code: number | null;
  err: string;
  out: string;
  /** Wall time, spawn to exit. */
  seconds: number;
  /** The child's own CPU (user + system; NaN without GNU time). */
  cpuSeconds: number;
  maxRssMiB: number;
}

/** GNU time measures the child alone (wait4): a rusage of children in this process would carry the
 *  largest child any test ever ran. */
const TIME = "/usr/bin/time";
const timed = existsSync(TIME);
if (!timed) console.warn(`${TIME} is not here: hostile-file tests check time, not memory`);

export function runCli(args: string[], env: Record<string, string> = {}, timeoutMs = 20_000): Outcome {
  const rssFile = join(rssDir(), `rss-${++runs}`);
  const t0 = performance.now();
  const cmd = timed ? [TIME, "-f", "%M %U %S", "-o", rssFile, "bun", CLI, ...args] : ["bun", CLI, ...args];
  const p = Bun.spawnSync(cmd, { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe", timeout: timeoutMs });
  const [kib, user, sys] = timed && existsSync(rssFile) ? readFileSync(rssFile, "utf8").trim().split("\n").pop()!.split(" ").map(Number) : [0, NaN, NaN];
  return {
    code: p.exitCode,
    err: p.stderr.toString(),
    out: p.stdout.toString().slice(0, 2000),
    seconds: (performance.now() - t0) / 1000,
    cpuSeconds: user! + sys!,
    maxRssMiB: kib! / 1024,
  };
}

/** Refused as a hostile file must be: non-zero, one line naming the file (and `says`), within
 *  `seconds` of the child's own CPU and `mib` of memory, and never blocked: its wall time within
 *  three times that (the wall alone measured the machine: a bomb's refusal, ~1 s alone, took 5.2 s
 *  of wall beside the whole suite's workers on two cores). */
export function expectRefused(o: Outcome, file: string, says: RegExp, bounds = { seconds: 5, mib: 300 }): void {
  const lines = o.err.trimEnd().split("\n");
  expect({ code: o.code, lines: lines.length, out: o.out }).toEqual({ code: 1, lines: 1, out: "" });
  expect(lines[0]!).toContain(file);
  expect(lines[0]!).toMatch(says);
  if (o.cpuSeconds === o.cpuSeconds) expect(o.cpuSeconds).toBeLessThan(bounds.seconds);
  expect(o.seconds).toBeLessThan(timed ? bounds.seconds * 3 : bounds.seconds);
  expect(o.maxRssMiB).toBeLessThan(bounds.mib);
}
