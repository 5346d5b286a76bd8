// The least a Bun program can do for `--json --once`'s numbers: libgpumem's warm-up thread started
// first (as src/cli.ts does), then NVML's binding, and every device's kept sample printed as JSON.
// No command line, no /proc, no document, no validation. bench/start-floor.ts times it.
import { warmUp } from "../src/ffi/warm-up";

warmUp({ oneShot: true });
const { Nvml } = await import("../src/ffi/nvml");
const nvml = Nvml.open();
const n = nvml.system().device_count;
const samples = [];
for (let i = 0; i < n; i++) samples.push(nvml.takeKept(i)?.sample ?? nvml.sample(i, { pcie: false }));
process.stdout.write(`${JSON.stringify(samples)}\n`);
