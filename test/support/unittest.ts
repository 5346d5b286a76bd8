// A Python unittest file run by `bun test`, so that one command runs every test: it passes, it ran
// (`count` tests where given), and the tests Python skipped are said rather than hidden.
import { expect } from "bun:test";

export function expectUnittestPasses(file: string, opts: { env?: NodeJS.ProcessEnv; count?: number; python?: string } = {}): void {
  const p = Bun.spawnSync([opts.python ?? "python3", file, "-v"], { env: opts.env ?? process.env, stdout: "pipe", stderr: "pipe" });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  for (const line of log.split("\n").filter((l) => / \.\.\. skipped /.test(l))) console.log(`skipped: ${line}`);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(opts.count === undefined ? /Ran \d+ tests?/ : new RegExp(`Ran ${opts.count} tests?`));
  expect(log).toContain("OK");
}
