// Eight ranks on one node, by simulation: eight models fed, on one thread, at the event rate of a
// real training run recorded on an H100 (test/fixtures/normal.ring, its steady-state steps) and at
// PyTorch's tightest allocation loop, for 10 s each. Reports the share of one core.
//   bun bench/scale.ts [OUT_DIR]
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { openRingRecording as openRecording } from "../src/collect/recording";
import { ACTION, newEventBatch, type EventBatch } from "../src/ffi/events";
import { createModel } from "../src/profiler";

const outDir = process.argv[2] ?? join(import.meta.dir, "results");
const rec = openRecording(join(import.meta.dir, "..", "test", "fixtures", "normal.ring"));
const all = newEventBatch(1 << 15);
rec.source.read(all);
// Steady state: from the first step mark on (the first step holds CUDA's own warm-up).
let first = 0;
while (first < all.count && all.action[first] !== ACTION.step) first++;
const n = all.count - first;
const spanUs = all.time_us[all.count - 1]! - all.time_us[first]!;
const measuredRate = n / (spanUs / 1e6);

function slice(from: number, count: number, shiftUs: number, out: EventBatch): void {
  for (let i = 0; i < count; i++) {
    const j = first + ((from + i) % n);
    out.time_us[i] = all.time_us[j]! + shiftUs;
    out.action[i] = all.action[j]!;
    out.device[i] = all.device[j]!;
    out.phase[i] = all.phase[j]!;
    out.address[i] = all.address[j]!;
    out.size[i] = all.size[j]!;
    out.stream[i] = all.stream[j]!;
    out.extra[i] = all.extra[j]!;
    out.step[i] = all.step[j]!;
    out.range[i] = all.range[j]!;
  }
  out.count = count;
}

async function simulate(ranks: number, rate: number, seconds: number) {
  const models = Array.from({ length: ranks }, () => createModel());
  const batch = newEventBatch(Math.ceil(rate / 10) + 1);
  const pos = new Array(ranks).fill(0);
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let loops = 0;
  for (let tick = 0; tick < seconds * 10; tick++) {
    const per = Math.round(rate / 10);
    for (let r = 0; r < ranks; r++) {
      slice(pos[r], per, Math.floor((pos[r] + per) / n) * spanUs, batch);
      models[r]!.ingest(batch);
      pos[r] += per;
    }
    loops++;
    const due = t0 + (tick + 1) * 100;
    const wait = due - performance.now();
    if (wait > 0) await Bun.sleep(wait);
  }
  const wall = (performance.now() - t0) / 1000;
  const c = process.cpuUsage(cpu0);
  return { ranks, events_per_second_per_rank: Math.round(rate), seconds: +wall.toFixed(2), cpu_share_of_one_core: +((c.user + c.system) / 1e6 / wall).toFixed(4), ticks: loops };
}

const realistic = await simulate(8, measuredRate, 10);
const tight = await simulate(8, 1_300_000, 10);
const result = { date: new Date().toISOString(), recorded_rate_events_per_second: Math.round(measuredRate), realistic, tight_loop: tight };
mkdirSync(outDir, { recursive: true });
writeFileSync(join(outDir, "scale.json"), `${JSON.stringify(result, null, 2)}\n`);
const md = `# Eight ranks on one node, simulated

Command: \`bun bench/scale.ts\` (${result.date}, this repository's 2-core machine, one thread).
Eight models fed every 100 ms for 10 s with events of a real training run recorded on an H100
(\`test/fixtures/normal.ring\`, steady-state steps, looped), at two rates per rank:

| rate per rank | source | CPU, share of one core |
| --- | --- | --- |
| ${result.recorded_rate_events_per_second.toLocaleString("en")} events/s | the recorded run's steady state (a small transformer, batch 16×64) | ${(realistic.cpu_share_of_one_core * 100).toFixed(1)}% |
| 1,300,000 events/s | PyTorch's tightest loop (\`torch.empty\`/\`del\`, 3 events each ~2.3 µs, bench/results/agent_overhead.md) | ${(tight.cpu_share_of_one_core * 100).toFixed(1)}% |

The monitor's own share per event is the model's ingest cost (bench/results/ingest.md); reading the
ring is one FFI call per batch.
`;
writeFileSync(join(outDir, "scale.md"), md);
console.log(md);
