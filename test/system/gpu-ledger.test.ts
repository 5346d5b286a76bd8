// A GPU's memory as the ledger gives it (issue 40): the processes NVML lists (the monitor's user's,
// other users', those with no process here), used that no listed process accounts for, the
// driver's reserve (NVML v2) and free, summing to the total; on the H200 documents of a recorded
// run, and with a listed pid whose process has exited (its /proc entry gone) said in words.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { processInfo } from "../../src/collect/procfs";
import { gpuLedger } from "../../src/system/ledger-rows";
import type { Document } from "../../src/system/schema";

const FX = join(import.meta.dir, "..", "fixtures");
const docs = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(FX, "compile-graphs.run.ndjson.gz")))).trim().split("\n").map((l) => JSON.parse(l) as Document);

test("on every recorded H200 sample: the rows sum to the total, the listed processes' used in their row, the driver's reserve apart", () => {
  let withProcess = 0;
  for (const doc of docs) {
    const d = doc.devices[0]!;
    const l = gpuLedger(d, doc.processes, "root")!;
    expect(l.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
    const listed = doc.processes.filter((p) => p.used_bytes !== null);
    expect(l.rows.find((r) => r.kind === "processes")!.bytes).toBe(listed.reduce((s, p) => s + p.used_bytes!, 0));
    expect(l.rows.find((r) => r.kind === "driver_reserved")!.bytes).toBe(d.memory_reserved_bytes!);
    // NVML's used is its listed processes' here (no other process on the GPU): nothing unlisted.
    expect(l.rows.find((r) => r.kind === "not_listed")!.bytes).toBe(d.memory_used_bytes! - listed.reduce((s, p) => s + p.used_bytes!, 0));
    if (listed.length) withProcess++;
    expect(l.words).toEqual([]);
  }
  expect(withProcess).toBeGreaterThan(10);
});

test("a listed pid with no process here is held memory of a gone process, said in words; another user's apart", async () => {
  const p = Bun.spawn(["true"]);
  await p.exited; // reaped: /proc has no such pid now
  const gone = processInfo(p.pid);
  expect(gone.name).toBeNull();
  const doc = docs.findLast((x) => x.processes.some((q) => q.pid === 558 && q.used_bytes !== null))!;
  const row = doc.processes.find((q) => q.pid === 558)!;
  const d = doc.devices[0]!;
  // The recorded process's memory, as NVML listed it, under a pid /proc no longer has.
  const l = gpuLedger(d, [{ pid: p.pid, used_bytes: row.used_bytes, user: gone.user, name: gone.name, command: gone.command }], "root")!;
  expect(l.rows.find((r) => r.kind === "gone")).toEqual({ kind: "gone", bytes: row.used_bytes!, pids: [p.pid] });
  expect(l.rows.find((r) => r.kind === "processes")!.bytes).toBe(0);
  expect(l.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
  expect(l.words).toEqual([expect.stringMatching(new RegExp(`^[\\d.]+ MiB held by pid ${p.pid}, which no longer exists here`))]);
  // The same process run by another user than the monitor's: their row, no words.
  const other = gpuLedger(d, [{ ...row, user: "someone" }], "root")!;
  expect(other.rows.find((r) => r.kind === "other_users")).toEqual({ kind: "other_users", bytes: row.used_bytes!, pids: [558] });
  expect(other.words).toEqual([]);
});
