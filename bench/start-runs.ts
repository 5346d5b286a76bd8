// Start-up comparisons' shared method (bench/start-compare.ts, bench/start-floor.ts): each command a
// fresh process timed from spawn to exit, every one run once first (the page cache, and NVML's kept
// constants), then REPS interleaved rounds, while a process holds 3 GiB on the GPU (as bench/nvml.ts
// runs it: a device with a process on it, as a user's is).

export interface StartStats {
  median_ms: number;
  min_ms: number;
  max_ms: number;
  runs_ms: number[];
}

function wallMs(cmd: string[]): number {
  const t0 = performance.now();
  const p = Bun.spawnSync(cmd, { stdout: "pipe", stderr: "pipe" });
  const t = performance.now() - t0;
  if (p.exitCode !== 0) throw new Error(`${cmd.join(" ")} failed (${p.exitCode}): ${p.stderr}`);
  return t;
}

/** `work` run while a process holds 3 GiB on the GPU (a device with a process on it, as a user's is). */
export async function withProcessOnGpu<T>(work: () => T | Promise<T>): Promise<T> {
  const holder = Bun.spawn(["python3", "-c", "import torch,time; x=torch.empty(3*2**30, dtype=torch.uint8, device='cuda'); print('ready', flush=True); time.sleep(300)"], { stdout: "pipe" });
  await holder.stdout.getReader().read();
  try {
    return await work();
  } finally {
    holder.kill();
  }
}

export async function timeStarts(commands: Record<string, string[]>, reps: number): Promise<Record<string, StartStats>> {
  const runs: Record<string, number[]> = Object.fromEntries(Object.keys(commands).map((k) => [k, []]));
  await withProcessOnGpu(() => {
    for (const cmd of Object.values(commands)) wallMs(cmd);
    for (let i = 0; i < reps; i++) for (const [k, cmd] of Object.entries(commands)) runs[k]!.push(wallMs(cmd));
  });
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  return Object.fromEntries(
    Object.entries(runs).map(([k, xs]) => [k, { median_ms: +median(xs).toFixed(1), min_ms: +Math.min(...xs).toFixed(1), max_ms: +Math.max(...xs).toFixed(1), runs_ms: xs.map((x) => +x.toFixed(1)) }]),
  );
}
