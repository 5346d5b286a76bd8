// A recorded ring's records as JSON rows [action, step, phase, address, size] (frees folded), for
// replay.py: `bun bench/forecast-replay/dump.ts RING.ring.gz OUT.json`.
import { openRingRecording } from "../../src/collect/recording";
import { ACTION_NAMES, newEventBatch } from "../../src/ffi/events";

const [ring, out] = process.argv.slice(2);
if (!ring || !out) throw new Error("usage: bun bench/forecast-replay/dump.ts RING.ring.gz OUT.json");
const rec = openRingRecording(ring);
const b = newEventBatch(65536);
const rows: Array<[string, number, number, number, number]> = [];
for (;;) {
  const { count } = rec.source.read(b);
  if (count === 0) break;
  for (let i = 0; i < count; i++) rows.push([ACTION_NAMES[b.action[i]!] ?? String(b.action[i]), b.step[i]!, b.phase[i]!, b.address[i]!, b.size[i]!]);
}
rec.close();
await Bun.write(out, JSON.stringify(rows));
console.log(`${ring}: ${rows.length} records -> ${out}`);
