// Issue 40 on the screens: each GPU's ledger (processes, other users, gone pids, not listed, the
// driver's reserve, free) under its header on the Overview, readable at 80x24 and 200x60; memory
// held by a pid that no longer exists said in words on the status line and the Findings screen.
// The GPU is a recorded H200's (compile-graphs.run.ndjson.gz, documents written during a real
// run); for the gone pid, the recorded process's NVML row is given a pid just reaped here (its
// /proc entry gone, as a process that exited with its memory still held leaves it).
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { processInfo } from "../../src/collect/procfs";
import { gpuLedger } from "../../src/system/ledger-rows";
import type { Document } from "../../src/system/schema";
import { formatBytes } from "../../src/tui/format";
import { settle } from "../support/settle";

const FX = join(import.meta.dir, "..", "fixtures");
const docs = new TextDecoder().decode(Bun.gunzipSync(readFileSync(join(FX, "compile-graphs.run.ndjson.gz")))).trim().split("\n").map((l) => JSON.parse(l) as Document);
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
/** The recorded document with its process, the GPU's ledger made as the document makes it now. */
const recorded = docs.findLast((x) => x.processes.some((q) => q.pid === 558 && q.used_bytes !== null))!;
const withLedger = (doc: Document, user: string | null): Document => ({ ...doc, devices: doc.devices.map((d) => ({ ...d, ledger: gpuLedger(d, doc.processes.filter((p) => p.device === d.index), user) })) });

function mount(doc: Document, columns: number, rows: number) {
  const ctl = new Controller(null, 1000);
  ctl.doc = doc;
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
  return { ui, lines: () => plain(ui.lastFrame()!).split("\n") };
}

for (const [columns, rows] of [[80, 24], [200, 60]] as const) {
  test(`${columns}x${rows}: the GPU's ledger under its header, every figure whole, summing to the total`, async () => {
    const doc = withLedger(recorded, "root");
    const d = doc.devices[0]!;
    const { ui, lines } = mount(doc, columns, rows);
    await settle();
    const frame = lines();
    for (const l of frame) expect(l.length).toBeLessThanOrEqual(columns);
    const at = frame.findIndex((l) => /^GPU 0 /.test(l));
    const line = frame[at + 2]!;
    const row = (k: string) => d.ledger!.rows.find((r) => r.kind === k)!.bytes;
    // The listed process's memory and free as NVML gave them; the driver's reserve where it fits.
    expect(line).toContain(`${columns >= 120 ? "processes (1)" : "procs"} ${formatBytes(row("processes"))}`);
    expect(line).toContain(`free ${formatBytes(row("free"))}`);
    expect(line).toContain(`${columns >= 120 ? "driver reserved" : "driver"} ${formatBytes(row("driver_reserved"))}`);
    expect(line).not.toMatch(/gone|other/);
    expect(d.ledger!.rows.reduce((s, r) => s + r.bytes, 0)).toBe(d.memory_total_bytes!);
    ui.unmount();
  });
}

test("a pid that no longer exists holds memory: on the GPU's line, said on the status line and the Findings screen", async () => {
  const p = Bun.spawn(["true"]);
  await p.exited; // reaped: /proc has no such pid now
  const gone = processInfo(p.pid);
  const doc = withLedger({ ...recorded, processes: recorded.processes.map((q) => (q.pid === 558 ? { ...q, pid: p.pid, user: gone.user, name: gone.name, command: gone.command, pytorch: null } : q)) }, "root");
  const held = doc.devices[0]!.ledger!.rows.find((r) => r.kind === "gone")!.bytes;
  expect(held).toBeGreaterThan(0);
  for (const [columns, rows] of [[80, 24], [200, 60]] as const) {
    const { ui, lines } = mount(doc, columns, rows);
    await settle();
    const frame = lines();
    for (const l of frame) expect(l.length).toBeLessThanOrEqual(columns);
    const at = frame.findIndex((l) => /^GPU 0 /.test(l));
    expect(frame[at + 2]).toContain(columns >= 120 ? `held by gone pids ${formatBytes(held)} (pid ${p.pid})` : `gone ${formatBytes(held)}`);
    // The header's corner counts it among the findings that ask for attention.
    expect(frame[0]).toMatch(/1 finding$/);
    const status = frame.at(-1)!;
    expect(status).toContain(`! warning: GPU 0: ${formatBytes(held)} held by pid ${p.pid}, which no longer exists here`);
    expect(status).not.toContain("…");
    // Its row in the table says there is no such process, rather than a blank COMMAND.
    expect(frame.find((l) => l.startsWith(`${p.pid} `))).toContain("[no process here]");
    ui.stdin.write("6");
    await settle();
    const findings = lines().join("\n");
    expect(findings).toContain(`WARNING  GPU 0: ${formatBytes(held)} held by pid ${p.pid}, which no longer exists here`);
    ui.unmount();
  }
});
