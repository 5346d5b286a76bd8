// The ledger per rank in the job view (issue 40): each rank's memory outside PyTorch (NVML used −
// reserved) and its ledger, and the rank whose outside memory stands out named in the job's notes.
// Ranks built from the H100 recordings (test/support/jobs.ts) hold the same context each: none
// stands out.
import { expect, test } from "bun:test";
import { jobNotes } from "../../src/system/jobs";
import { hostDocument, TORCHRUN } from "../support/jobs";

test("every rank carries its memory outside PyTorch; ranks alike name none", () => {
  const doc = hostDocument(TORCHRUN);
  const job = doc.jobs[0]!;
  for (const r of job.ranks) {
    const p = doc.processes.find((x) => x.pid === r.pid)!;
    expect(r.outside_pytorch_bytes).toBe(p.used_bytes! - p.pytorch!.reserved_bytes);
  }
  expect(new Set(job.ranks.map((r) => r.outside_pytorch_bytes)).size).toBe(1);
  expect(job.outside_rank).toBeNull();
  expect(jobNotes(job).some((n) => n.includes("outside PyTorch"))).toBe(false);
});
