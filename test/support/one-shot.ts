// A one-shot's start in a process of its own (NVML's warm-up starts once a process): the warm-up
// with its sample kept, then, DELAY ms later, the first part of that sample as the thread published
// it (Nvml.early) and two samples of the collector. Prints them as JSON.
//   bun test/support/one-shot.ts AGENT_DIR DELAY_MS
import { warmUp } from "../../src/ffi/warm-up";

const [agentDir, delay] = process.argv.slice(2);
const before = Date.now();
warmUp({ oneShot: true });
const { Machine } = await import("../../src/collect/machine");
const { Nvml } = await import("../../src/ffi/nvml");
const c = new Machine({ agentDir });
await Bun.sleep(Number(delay));
const early = Nvml.early();
const tick = Date.now();
const first = c.sample(tick, { oneShot: true });
const second = c.sample(Date.now(), { oneShot: true });
c.close();
console.log(JSON.stringify({ before, early, tick, first, second }));
