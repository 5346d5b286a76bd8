// The agent's names belong to the moment they were taken: a live reader applies them between the
// records of a batch, at the ring index the reply gives, so a block freed just after (zero_grad)
// and an address handed to another tensor are not named for what was there before.
import { expect, test } from "bun:test";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Agent } from "../../src/collect/agents";
import { LiveModels } from "../../src/collect/live";
import { NameRequests } from "../../src/collect/name-requests";
import { openRing } from "../../src/ffi/ring";
import { ACTION, HEADER_OFFSET, HEADER_SIZE, MODE, RECORD_OFFSET, RECORD_SIZE, RING_ABI_VERSION, RING_MAGIC } from "../../src/ffi/wire";
import { blocks, createModel } from "../../src/profiler";

const MiB = 1 << 20;
type Rec = { action: number; address?: number; size?: number; step?: number; phase?: number };

/** A ring file as the hook leaves it (records in unix ns), written field by field from the wire offsets. */
function ringFile(path: string, recs: Rec[], pid: number): void {
  const capacity = 64;
  const buf = Buffer.alloc(HEADER_SIZE + capacity * RECORD_SIZE);
  buf.writeBigUInt64LE(RING_MAGIC, HEADER_OFFSET.magic);
  buf.writeUInt32LE(RING_ABI_VERSION, HEADER_OFFSET.abi_version);
  buf.writeUInt32LE(HEADER_SIZE, HEADER_OFFSET.header_size);
  buf.writeUInt32LE(RECORD_SIZE, HEADER_OFFSET.record_size);
  buf.writeUInt32LE(1, HEADER_OFFSET.n_devices);
  buf.writeBigUInt64LE(BigInt(capacity), HEADER_OFFSET.capacity);
  buf.writeInt32LE(pid, HEADER_OFFSET.pid);
  buf.writeUInt32LE(MODE.hook, HEADER_OFFSET.mode);
  buf.writeBigUInt64LE(BigInt(recs.length), HEADER_OFFSET.write_index);
  recs.forEach((r, i) => {
    const o = HEADER_SIZE + i * RECORD_SIZE;
    buf.writeBigUInt64LE(BigInt(i + 1), o + RECORD_OFFSET.seq);
    buf.writeBigUInt64LE(BigInt(1_800_000_000_000_000_000 + i * 1000), o + RECORD_OFFSET.time);
    buf.writeBigUInt64LE(BigInt(r.address ?? 0), o + RECORD_OFFSET.address);
    buf.writeBigUInt64LE(BigInt(r.size ?? 0), o + RECORD_OFFSET.size);
    buf.writeUInt32LE(r.step ?? 1, o + RECORD_OFFSET.step);
    buf.writeUInt8(r.action, o + RECORD_OFFSET.action);
    buf.writeUInt8(r.phase ?? 0, o + RECORD_OFFSET.phase);
  });
  writeFileSync(path, buf);
}

for (const fold of [false, true]) {
  test(`names taken mid-batch name the blocks of their moment, not the tensor that took an address after${fold ? " (frees folded, as the monitor reads)" : ""}`, async () => {
    const dir = mkdtempSync(join(tmpdir(), "gpumem-names-at-"));
    const A = 0x7f00_0000_0000;
    // index 0 segment, 1 the gradient's block, [names taken at index 2], 2 its free (zero_grad) and 3
    // its completion (a folding reader makes them one record), 4 a kept tensor made at the same
    // address, 5 another block
    ringFile(join(dir, "7.ring"), [
      { action: ACTION.segment_alloc, address: A, size: 8 * MiB },
      { action: ACTION.alloc, address: A, size: 2 * MiB, phase: 2 },
      { action: ACTION.free_requested, address: A, size: 2 * MiB },
      { action: ACTION.free_completed, address: A, size: 2 * MiB },
      { action: ACTION.alloc, address: A, size: 2 * MiB },
      { action: ACTION.alloc, address: A + 2 * MiB, size: 1 * MiB },
    ], 7);
    const names = new NameRequests(async () => ({ ok: true, tensors: [{ address: A, size: 2 * MiB, name: "lm_head.weight.grad", category: "gradient", shape: [1024, 512], dtype: "float32", device: 0 }], skipped: 0, scan: false, write_index: 2, step: 1, scan_ms: 1 }));
    const agent: Agent = { pid: 7, manifest: { version: 1, pid: 7, cmdline: ["train.py"], devices: [0], hook_mode: "hook", ring: join(dir, "7.ring"), socket: join(dir, "7.sock"), ranges: {} } as never, manifestStamp: "", ring: openRing(join(dir, "7.ring"), { fold }), header: null, exited: false, problem: null };
    const live = new LiveModels();
    const model = createModel();
    live.byPid.set(7, { pid: 7, model, source: "live", socket: agent.manifest.socket, title: "train.py", ended: false, names });
    // the reply is in before the reader has read anything (asked when the agent appeared)
    names.askIfDue(agent.manifest.socket, model, 0);
    await Bun.sleep(10);
    live.update([agent], null, 1_000_000);
    expect(names.status).toMatchObject({ tensors: 1, matched: 1 });
    // the block the name was given to is gone; the tensor made after at its address has no name
    const held = blocks(model, { sort: "address" }).blocks;
    expect(held.map((b) => [b.address, b.name])).toEqual([[A, null], [A + 2 * MiB, null]]);
    expect(held[0]!.category).not.toBe("gradient");
    agent.ring!.close();
  });
}
