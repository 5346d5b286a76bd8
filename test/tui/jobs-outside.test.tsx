// The job's rank that stands out outside PyTorch, on the Overview (issue 40): the 2xH200 DDP run's
// recorded document (bench/results/gpu-2026-11-23/ranks-h200x2-docs.ndjson) with rank 0's NVML used
// raised 900 MiB (the one figure changed: its ranks held the same memory outside PyTorch to the
// byte, and a real standout is owed to a GPU session; test/system/jobs-ledger.test.ts says so).
// The note under the job's row names rank 0, readable at 80x24 and 200x60.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { groupJobs, type JobMember } from "../../src/system/jobs";
import { ledgerRows } from "../../src/system/ledger-rows";
import { DocumentSchema, type Document, type Process } from "../../src/system/schema";
import { settle } from "../support/settle";

const DDP = join(import.meta.dir, "..", "..", "bench", "results", "gpu-2026-11-23", "ranks-h200x2-docs.ndjson");
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

function raised(bytes: number): Document {
  // Read as a document of this version reads it (fields it lacks take their defaults).
  const doc = DocumentSchema.parse((JSON.parse(readFileSync(DDP, "utf8").split("\n")[0]!) as { doc: unknown }).doc);
  const job = doc.jobs[0]!;
  const processes: Process[] = doc.processes.map((p) => {
    const used = p.used_bytes! + (p.pytorch!.rank === 0 ? bytes : 0);
    const t = p.pytorch!;
    return { ...p, used_bytes: used, pytorch: { ...t, non_pytorch_bytes: used - t.reserved_bytes, ledger: ledgerRows({ nvml_used_bytes: used, allocated_bytes: t.allocated_bytes, reserved_bytes: t.reserved_bytes, private_pools: [], parts: null }) } };
  });
  const members: JobMember[] = processes.map((p) => ({ pid: p.pid, ppid: job.launcher_pid, rank: p.pytorch!.rank ?? null, local_rank: p.pytorch!.rank ?? null, world_size: job.world_size, job: job.id, command: p.command, exited: false }));
  return { ...doc, processes, jobs: groupJobs(processes, members) };
}

for (const [columns, rows] of [[80, 24], [200, 60]] as const) {
  test(`${columns}x${rows}: the job's note names rank 0 and what it holds more outside PyTorch`, async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = raised(900 * 2 ** 20);
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
    await settle();
    const frame = plain(ui.lastFrame()!).split("\n");
    for (const l of frame) expect(l.length).toBeLessThanOrEqual(columns);
    const notes = frame.filter((l) => l.startsWith("    ")).join(" ").replace(/\s+/g, " ");
    expect(notes).toContain("rank 0 holds 900.00 MiB more outside PyTorch than the others (unexplained +900.00 MiB)");
    ui.unmount();
  });
}
