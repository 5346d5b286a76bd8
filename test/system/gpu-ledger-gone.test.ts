// A GPU whose memory a process that no longer exists holds (issue 40), recorded on an H200 by
// bench/gpu-parts/ledger-screens.sh: test/gpu/ledger_gone.py made a context holding 512 MiB, forked
// a keeper that kept the inherited /dev/nvidia* descriptors open, and left; NVML went on listing
// the owner's pid (gone-nvml.json, as the script read it then) with no such process in /proc. The
// monitor's `--json --once` of that moment (gone.json) is read back: its GPU ledger made again
// from the document's own devices and processes, the gone row holding the owner's pid at NVML's
// figure, and the warning the Overview's status line gives.
import { expect, test } from "bun:test";
import { gpuLedger } from "../../src/system/ledger-rows";
import { formatBytes } from "../../src/words";
import type { Document } from "../../src/system/schema";
import { gpuLedgerLine } from "../../src/tui/screens/gpu-ledger-line";
import { gpuStatusWords } from "../../src/tui/screens/held-memory";
import goneDoc from "../fixtures/ledger/gone.json";
import owner from "../fixtures/ledger/gone-owner.json";
import nvmlThen from "../fixtures/ledger/gone-nvml.json";

const doc = goneDoc as unknown as Document;

test("the recorded GPU: the owner's pid, gone from /proc, in the gone row at NVML's figure of it; the rows sum to the total", () => {
  const listedThen = nvmlThen.find((p) => p.pid === owner.owner)!;
  expect(listedThen.proc_state).toBeNull(); // no such process when NVML listed it
  const d = doc.devices.find((x) => x.index === listedThen.device)!;
  const listed = doc.processes.filter((p) => p.device === d.index && p.nvml_visible);
  const l = gpuLedger(d, listed, "root")!;
  expect(l.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
  expect(l.rows.find((r) => r.kind === "gone")).toEqual({ kind: "gone", bytes: listedThen.used_bytes, pids: [owner.owner] });
  // More than the owner's own 512 MiB: NVML counts its context too.
  expect(listedThen.used_bytes).toBeGreaterThan(owner.bytes);
  expect(l.rows.find((r) => r.kind === "processes")!.bytes).toBe(0);
  // What the monitor wrote then is what it makes of the same figures now.
  expect(d.ledger).toEqual(l);
  expect(l.words).toEqual([expect.stringMatching(new RegExp(`^[\\d.]+ GiB held by pid ${owner.owner}, which no longer exists here \\(exited with its memory still held, or in another container\\)$`))]);
});

test("the Overview says it: the GPU's line has a gone part, the status line the warning with the pid", () => {
  const d = doc.devices[0]!;
  const held = formatBytes(nvmlThen.find((p) => p.pid === owner.owner)!.used_bytes);
  expect(gpuLedgerLine(d, 80)!.text).toContain(`gone ${held}`);
  expect(gpuLedgerLine(d, 200)!.text).toContain(`held by gone pids ${held} (pid ${owner.owner})`);
  for (const w of [80, 200]) expect(Bun.stringWidth(gpuLedgerLine(d, w)!.text)).toBeLessThanOrEqual(w);
  expect(gpuStatusWords(doc, null)).toBe(`! warning: GPU 0: ${held} held by pid ${owner.owner}, which no longer exists here`);
});
