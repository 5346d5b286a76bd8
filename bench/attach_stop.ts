#!/usr/bin/env bun
// How long `gpumem-tui attach` keeps a target's threads stopped (issue: at most 50 ms in all per
// attach): attach/detach N times into a python3 that sleeps in short steps (1 thread) and into one
// with several busy and sleeping threads, and print the distribution. CPU only (test-only switches:
// any python3, the probe payload). Usage: bun bench/attach_stop.ts [N]   (writes nothing itself)
import { detachProcess } from "../src/commands/detach";
import { attach, startTarget, testEnv } from "../test/attach/support";

const n = Number(process.argv[2] ?? 50);
const pct = (xs: number[], p: number) => xs.slice().sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function run(mode: string): Promise<number[]> {
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const env = testEnv();
    const t = await startTarget(mode, 0, `${env.GPUMEM_TUI_DIR}.stop`);
    const r = await attach(t.pid, env);
    if (!r.ok) throw new Error(r.line);
    out.push(r.stoppedUs / 1000);
    await detachProcess(t.pid, env);
    await Bun.write(`${env.GPUMEM_TUI_DIR}.stop`, "");
    t.proc.kill();
    await t.done;
  }
  return out;
}

console.log(`attach stop time (first PTRACE_INTERRUPT to last PTRACE_DETACH), ${n} attaches each, python3 ${Bun.spawnSync(["python3", "-V"]).stdout.toString().trim()}`);
for (const mode of ["serve", "threads"]) {
  const ms = await run(mode);
  console.log(`${mode.padEnd(8)} threads=${mode === "serve" ? 1 : 5}  median ${pct(ms, 50).toFixed(2)} ms  p95 ${pct(ms, 95).toFixed(2)} ms  max ${Math.max(...ms).toFixed(2)} ms`);
}
