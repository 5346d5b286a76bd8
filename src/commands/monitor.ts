// `gpumem-tui` and `gpumem-tui --json`: the monitor, or its documents, from the sampling session.
import { warmUp } from "../ffi/warm-up";
import { liveModels } from "./live-models";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  warmUp({ oneShot: opts.once }); // started already by src/cli.ts; a second call does nothing
  if (opts.json && opts.demo) return await demoJson(opts);
  const { Machine } = await import("../collect/machine");
  const machine = new Machine();
  try {
    if (opts.json) {
      // Loaded together, before the first sample waits for NVML's thread.
      const [{ streamJson }, { Session }] = await Promise.all([import("../headless/stream"), import("../collect/session")]);
      await streamJson(new Session(machine, liveModels({ keepTrace: false })), { once: opts.once, intervalMs: opts.intervalMs });
      return 0;
    }
    const [{ runMonitor }, { Session }] = await Promise.all([loadScreens(), import("../collect/session")]);
    // The screens keep each model's newest records (phase bands, `d`).
    return await runMonitor(new Session(machine, liveModels({ keepTrace: true, screens: true })), { ...opts, speed: opts.speed });
  } finally {
    machine.close({ fast: opts.once });
  }
}

/** `--json --demo`: the demo's recorded machine, no NVML asked (headless/demo.ts). */
async function demoJson(opts: Options): Promise<number> {
  const [{ streamJson, serialize }, { demoDocument, DemoSampler }, { writeOut }] = await Promise.all([import("../headless/stream"), import("../headless/demo"), import("../headless/out")]);
  if (opts.once) return (await writeOut(`${serialize(demoDocument())}\n`), 0);
  const demo = new DemoSampler({ speed: opts.speed ?? 1 });
  try {
    await streamJson(demo, { once: false, intervalMs: opts.intervalMs });
  } finally {
    demo.close();
  }
  return 0;
}
