// A ring of several lanes, compacted by the agent's tool (python3 -m gpumem_agent.ring compact), is
// one lane that the monitor's reader reads to the very records, in the same order, as the ring
// itself: the recording merges the lanes as the live reader does.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ACTION, newEventBatch } from "../../src/ffi/events";
import { ROOT } from "../../src/ffi/build";
import { openRing } from "../../src/ffi/ring";
import { HEADER_OFFSET } from "../../src/ffi/wire";
import { writeLaneRing, type LaneRecord } from "../support/lanes";
import { tmpPath } from "../support/native";

/** Every column of every record the reader gives, and its count of lost records. */
function readAll(path: string) {
  const r = openRing(path);
  const b = newEventBatch(64);
  const rows: number[][] = [];
  let lost = 0;
  for (let got = r.read(b); got.count > 0 || got.lost > 0; got = r.read(b)) {
    lost += got.lost;
    for (let i = 0; i < got.count; i++) rows.push([b.time_us[i]!, b.action[i]!, b.device[i]!, b.address[i]!, b.size[i]!, b.step[i]!]);
  }
  r.close();
  return { rows, lost };
}

test("compacting a ring of lanes gives one lane that reads to the same records, merged by time", () => {
  const src = tmpPath("compact-lanes.ring");
  const dst = tmpPath("compact-lanes.out.ring");
  const ev = (t: number, device: number, action: number = ACTION.alloc): LaneRecord => ({ time: t * 1000, action, device, address: 0x7f00_0000_0000 + t * 512, size: 512 * t, step: t % 3 });
  const dev0 = Array.from({ length: 20 }, (_, i) => ev(100 + 2 * i, 0, i % 2 ? ACTION.free_requested : ACTION.alloc)); // 20 into 16 slots
  const dev1 = [ev(101, 1), ev(120, 1), ev(121, 1, ACTION.segment_alloc)];
  writeLaneRing(src, { capacity: 16, lanes: [[ev(99, -1, ACTION.step), ev(130, -1, ACTION.phase)], dev0, dev1] });
  const p = Bun.spawnSync(["python3", "-m", "gpumem_agent.ring", "compact", src, dst], { env: { ...process.env, PYTHONPATH: join(ROOT, "agent") }, stdout: "pipe", stderr: "pipe" });
  expect(p.stderr.toString()).toBe("");
  expect(p.stdout.toString().trim()).toBe(`21 records -> ${dst}`);
  const live = readAll(src);
  const compact = readAll(dst);
  expect(live.lost).toBe(4);
  expect(compact.lost).toBe(0);
  expect(compact.rows).toEqual(live.rows);
  expect(compact.rows.map((r) => r[0])).toEqual([...compact.rows.map((r) => r[0])].sort((a, b) => a! - b!));
  expect(compact.rows.slice(0, 4).map((r) => [r[0], r[2]])).toEqual([[99, -1], [101, 1], [108, 0], [110, 0]]);
  const header = readFileSync(dst).subarray(0, 4096);
  expect([header.readUInt32LE(HEADER_OFFSET.abi_version), header.readUInt32LE(HEADER_OFFSET.n_lanes)]).toEqual([2, 1]);
});
