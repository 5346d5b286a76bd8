// A whole job: `attach` on a launcher's pid (test/attach/launcher/torchrun, a stand-in named like
// torchrun) attaches each of its two python3 ranks, one at a time, says so, and leaves the launcher
// alone; every rank's output and exit status, and the launcher's, are what they are without attach.
import { expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { detachProcess } from "../../src/commands/detach";
import { ROOT } from "../../src/root";
import { agentFiles, counts, probeRecords, TARGET, testEnv } from "./support";

const TORCHRUN = join(ROOT, "test/attach/launcher/torchrun");

function launcher(stop: string) {
  return ["python3", TORCHRUN, "--nproc-per-node", "2", TARGET, "serve", "5", stop];
}

async function output(proc: ReturnType<typeof Bun.spawn>) {
  return { stdout: await new Response(proc.stdout as ReadableStream).text(), code: await proc.exited };
}

test("attach LAUNCHER attaches both ranks, leaves the launcher alone, changes no output or status", async () => {
  const env = testEnv();
  // What the job prints left alone: its ranks find their stop files at once.
  const ref = `${env.GPUMEM_TUI_DIR}.ref`;
  for (const r of [0, 1]) await Bun.write(`${ref}.${r}`, "");
  const want = await output(Bun.spawn(launcher(ref), { stdout: "pipe", stderr: "ignore" }));
  expect(want).toEqual({ stdout: "rank 0: checksum served (status 5)\nrank 1: checksum served (status 5)\n", code: 3 });

  const stop = `${env.GPUMEM_TUI_DIR}.stop`;
  const job = Bun.spawn(launcher(stop), { stdout: "pipe", stderr: "pipe" });
  const reader = job.stderr.getReader();
  let text = "";
  while (!/ready .*\n/.test(text)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`launcher ended: ${text}`);
    text += new TextDecoder().decode(value);
  }
  const ranks: number[] = JSON.parse(/ready (.*)\n/.exec(text)![1]!).ranks;
  const before = { ...counts(job.pid), mapsText: readFileSync(`/proc/${job.pid}/maps`, "utf8") };

  const cli = Bun.spawnSync(["bun", `${ROOT}/src/cli.ts`, "attach", String(job.pid), "--no-monitor"], { env, stdout: "pipe", stderr: "pipe" });
  const lines = cli.stderr.toString().trim().split("\n");
  expect(cli.exitCode).toBe(0);
  expect(lines[0]).toBe(`gpumem-tui: process ${job.pid} is a launcher: attaching its 2 ranks (${ranks.join(", ")})`);
  expect(lines.slice(1)).toHaveLength(2);
  ranks.forEach((r, i) => expect(lines[1 + i]).toMatch(new RegExp(`^gpumem-tui: attached to process ${r} \\(Python 3\\.\\d+\\.\\d+\\); steps count from here; its threads were stopped [\\d.]+ ms$`)));
  // The bootstrap ran once in each rank (on its main thread), never in the launcher.
  for (const r of ranks) {
    const rec = probeRecords(env, r);
    expect(rec.map((x) => [x.pid, x.boot.main_thread])).toEqual([[r, true]]);
  }
  expect(probeRecords(env, job.pid)).toEqual([]);
  expect({ ...counts(job.pid), mapsText: readFileSync(`/proc/${job.pid}/maps`, "utf8") }).toEqual(before);

  for (const r of ranks) expect((await detachProcess(r, env)).ok).toBe(true);
  expect(agentFiles(env)).toEqual([]);
  for (const r of [0, 1]) await Bun.write(`${stop}.${r}`, "");
  reader.releaseLock();
  expect(await output(job)).toEqual(want);
  expect(existsSync(`/proc/${job.pid}`)).toBe(false);
}, 60_000);
