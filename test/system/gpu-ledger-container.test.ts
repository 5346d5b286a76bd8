// The GPU ledger seen from a container (issue 40): the driver lists to NVML only the processes of
// the monitor's own pid namespace, so a process outside it (test/gpu/ledger_hold.py's 1 GiB, 1542
// MiB in NVML) is in no row of its own but in not_listed. Recorded on an H200 with the monitor
// under `unshare --pid --fork --mount-proc` (test/fixtures/ledger/container.json, its holder's
// figures beside it); the monitor knows it runs in a pid namespace of its own, and its GPU line
// says whose memory that is rather than "unlisted".
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import { INITIAL_PID_NAMESPACE, inNestedPidNamespace, ownPidNamespace } from "../../src/collect/procfs";
import { gpuLedger } from "../../src/system/ledger-rows";
import type { Document } from "../../src/system/schema";
import { gpuLedgerLine } from "../../src/tui/screens/gpu-ledger-line";
import containerDoc from "../fixtures/ledger/container.json";
import holder from "../fixtures/ledger/container-holder.json";

const doc = containerDoc as unknown as Document;
const MiB = 2 ** 20;

test("the recorded container's GPU: no process listed, the holder's memory in not_listed, said as outside this container's view", () => {
  const d = doc.devices[0]!;
  const listed = doc.processes.filter((p) => p.device === d.index && p.nvml_visible);
  expect(listed).toEqual([]);
  const l = gpuLedger(d, listed, "root", true)!;
  expect(l.container_view).toBe(true);
  const notListed = l.rows.find((r) => r.kind === "not_listed")!;
  expect(notListed.bytes).toBeGreaterThanOrEqual(holder.nvml_used_bytes);
  expect(l.rows.find((r) => r.kind === "gone")!.bytes).toBe(0);
  expect(l.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
  const dev = { ...d, ledger: l };
  expect(gpuLedgerLine(dev, 200)!.text).toContain("outside this container's view 1.51 GiB");
  expect(gpuLedgerLine(dev, 80)!.text).toContain("outside container 1.51 GiB");
  for (const w of [80, 200]) expect(Bun.stringWidth(gpuLedgerLine(dev, w)!.text)).toBeLessThanOrEqual(w);
  // The host's monitor (not in a container) keeps its words: not_listed is then the driver's few MiB.
  expect(gpuLedgerLine({ ...d, ledger: gpuLedger(d, listed, "root", false) }, 80)!.text).toContain("unlisted 1.51 GiB");
  expect(notListed.bytes).toBeLessThan(holder.nvml_used_bytes + 16 * MiB);
});

test("a monitor started under unshare --pid knows it runs in a pid namespace of its own; one in the host's does not", () => {
  const probe = `import { inNestedPidNamespace } from ${JSON.stringify(join(ROOT, "src", "collect", "procfs.ts"))}; console.log(inNestedPidNamespace())`;
  const inside = Bun.spawnSync(["unshare", "--pid", "--fork", "--mount-proc", process.execPath, "-e", probe]);
  expect({ unshare: inside.exitCode, stderr: new TextDecoder().decode(inside.stderr).trim() }).toEqual({ unshare: 0, stderr: "" });
  expect(new TextDecoder().decode(inside.stdout).trim()).toBe("true");
  expect(inNestedPidNamespace()).toBe(ownPidNamespace() !== INITIAL_PID_NAMESPACE);
  expect(inNestedPidNamespace(INITIAL_PID_NAMESPACE)).toBe(false);
  expect(inNestedPidNamespace(null)).toBe(false);
});
