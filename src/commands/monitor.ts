// `gpumem-tui` and `gpumem-tui --json`: the monitor, or its documents, from the sampling session.
import { warmUp } from "../ffi/warm-up";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  warmUp({ oneShot: opts.once }); // started already by src/cli.ts; a second call does nothing
  const { SystemCollector } = await import("../collect/system");
  const collector = new SystemCollector();
  try {
    if (opts.json) {
      // Loaded together, before the first sample waits for NVML's thread.
      const [{ streamJson }, { Session }] = await Promise.all([import("../headless/stream"), import("../collect/session")]);
      await streamJson(new Session(collector), { once: opts.once, intervalMs: opts.intervalMs });
      return 0;
    }
    const { runMonitor } = await loadScreens();
    return await runMonitor(collector, { ...opts, speed: opts.speed });
  } finally {
    collector.close({ fast: opts.once });
  }
}
