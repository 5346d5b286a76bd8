// `gpumem-tui` and `gpumem-tui --json`: the monitor, or its documents, from the sampling session.
import { warmUp } from "../ffi/nvml";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  warmUp(); // started already at load when run as a program; a second call does nothing
  const { SystemCollector } = await import("../collect/system");
  const collector = new SystemCollector();
  try {
    if (opts.json) {
      const { streamJson } = await import("../headless/stream");
      const { Session } = await import("../collect/session");
      await streamJson(new Session(collector), { once: opts.once, intervalMs: opts.intervalMs });
      return 0;
    }
    const { runMonitor } = await loadScreens();
    return await runMonitor(collector, { ...opts, speed: opts.speed });
  } finally {
    collector.close({ fast: opts.once });
  }
}
