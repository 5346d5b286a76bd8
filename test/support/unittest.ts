// A Python unittest file run by `bun test`, so that one command runs every test: it passes, it ran
// (`count` tests where given), and the tests Python skipped are said rather than hidden.
import { expect } from "bun:test";

type Opts = { env?: NodeJS.ProcessEnv; count?: number; python?: string };

export function expectUnittestPasses(file: string, opts: Opts = {}): void {
  const p = Bun.spawnSync([opts.python ?? "python3", file, "-v"], { env: opts.env ?? process.env, stdout: "pipe", stderr: "pipe" });
  expectPassed(p.exitCode, p.stderr.toString(), opts.count);
}

/** The same, without holding the test worker while Python runs: files whose unittest runs are
 *  independent (one a CPython) run them as concurrent tests, on both cores. */
export async function unittestPasses(file: string, opts: Opts = {}): Promise<void> {
  const p = Bun.spawn([opts.python ?? "python3", file, "-v"], { env: opts.env ?? process.env, stdout: "ignore", stderr: "pipe" });
  const [log, code] = await Promise.all([new Response(p.stderr).text(), p.exited]);
  expectPassed(code, log, opts.count);
}

function expectPassed(code: number | null, log: string, count: number | undefined): void {
  if (code !== 0) console.log(log);
  for (const line of log.split("\n").filter((l) => / \.\.\. skipped /.test(l))) console.log(`skipped: ${line}`);
  expect(code).toBe(0);
  expect(log).toMatch(count === undefined ? /Ran \d+ tests?/ : new RegExp(`Ran ${count} tests?`));
  expect(log).toContain("OK");
}
