// One sampling session for every front end: a training run recorded on an H100 (normal.ring) sits
// in an agent directory as a live process's ring; the session's document and the screens show the
// same numbers, each from one function.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { render } from "ink-testing-library";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { Machine } from "../../src/collect/machine";
import { DocumentSchema } from "../../src/system/schema";
import { exposition } from "../../src/headless/prometheus";
import { formatBytes } from "../../src/words";
import { ProcessScreen } from "../../src/tui/screens/process";
import { TensorsScreen } from "../../src/tui/screens/tensors";
import { plantAgent } from "../support/planted-agent";

const sleeper = Bun.spawn(["sleep", "60"]);
afterAll(() => sleeper.kill());

/** A recorded ring as the ring of the live `sleep` process (the header's pid rewritten), with its manifest. */
function agentDir(name = "normal"): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-session-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  plantAgent(dir, sleeper.pid, {}, name);
  return dir;
}

describe("the sampling session", () => {
  const session = new Session(new Machine({ agentDir: agentDir() }), liveModels({ keepTrace: false }));
  const doc = session.tick();
  const row = doc.processes.find((p) => p.agent_pid === sleeper.pid || p.pid === sleeper.pid)!;
  const profile = row?.pytorch?.profile;
  const pm = session.models.byPid.get(sleeper.pid)!;

  test("one tick: the document carries the process's profile, and the schema holds it", () => {
    expect(row.pytorch).not.toBeNull();
    expect(profile).toBeTruthy();
    expect(DocumentSchema.parse(JSON.parse(JSON.stringify(doc))).processes.find((p) => p.pytorch)!.pytorch!.profile).toEqual(profile!);
    expect(profile!.detail).toMatchObject({ partial: false, causes: [], lost_records: 0 });
    expect(profile!.steps_complete).toBe(20);
    expect(profile!.last_step!.ranges.map((r) => r.name)).toEqual(expect.arrayContaining(["train_step", "mlp_block", "Optimizer.step#AdamW.step"]));
    expect(profile!.findings).toEqual([]);
  });

  test("the Process screen and the JSON say the same step, peak and phase", () => {
    const ui = render(<ProcessScreen pm={pm} width={160} height={50} ascii={false} />);
    const text = ui.lastFrame()!;
    const last = profile!.last_step!;
    expect(text).toContain(`Step ${last.step}: peak ${formatBytes(last.peak_allocated_bytes)} in ${last.peak_phase}`);
    // The same phase under its screen word: the schema's "other" reads "outside" (the category keeps "other").
    expect(profile!.phase).toBe("other");
    expect(text).toContain(`step ${profile!.step}  phase outside`);
    ui.unmount();
  });

  test("the Tensors screen and the JSON list the same categories and the same largest blocks", () => {
    const ui = render(<TensorsScreen pm={pm} width={160} height={60} sort="size" reverse={false} filter="" selected={0} />);
    const text = ui.lastFrame()!;
    for (const c of profile!.categories.filter((x) => x.bytes > 0)) expect(text).toMatch(new RegExp(`${c.category}\\s+${formatBytes(c.bytes).replace(".", "\\.")}`));
    // A named tensor by its name; an unnamed one by its size (the screen groups alike unnamed blocks
    // and says where they were allocated, not their category again).
    for (const t of profile!.largest_tensors.slice(0, 5)) expect(text).toContain(t.label.startsWith("(") ? formatBytes(t.size_bytes) : t.label);
    ui.unmount();
  });

  test("Prometheus: live bytes per category and a gauge per active finding, from the same profile", () => {
    const text = exposition(doc);
    const labels = processLabels(doc, row);
    for (const c of profile!.categories) expect(text).toContain(`gpumem_pytorch_live_bytes{${labels},category="${c.category}"} ${c.bytes}`);
    expect(text).toContain(`gpumem_pytorch_block_detail_partial{${labels}} 0`);
    expect(text).not.toContain("gpumem_finding_active"); // a normal run: nothing to report
  });

  test("the directory is scanned once a tick, the ring read once: a second tick reads nothing new", () => {
    const before = pm.model.eventsIngested;
    session.tick();
    expect(pm.model.eventsIngested).toBe(before);
  });
});

/** A process's labels as the exposition writes them: its GPU's UUID where this machine has that GPU
 *  (on a GPU machine the recorded process's device index names a real one). */
function processLabels(doc: { host: string; devices: { index: number; uuid: string }[] }, p: { device: number | null; pid: number; name: string | null }): string {
  const uuid = doc.devices.find((d) => d.index === p.device)?.uuid;
  return `hostname="${doc.host}",gpu="${p.device}",${uuid ? `uuid="${uuid}",` : ""}pid="${p.pid}",process="${p.name}"`;
}

describe("a run that keeps every step's validation graph (kept-loss-graph.ring)", () => {
  test("the JSON names the growth per step, in words and numbers, and Prometheus raises its gauge", () => {
    const doc = new Session(new Machine({ agentDir: agentDir("kept-loss-graph") }), liveModels({ keepTrace: false })).tick();
    const p = doc.processes.find((x) => x.pytorch?.profile)!;
    const growth = p.pytorch!.profile!.findings.find((f) => f.id === "growth")!;
    expect(growth.severity).toBe("warning");
    expect(growth.title).toMatch(/grows/);
    expect(Number(growth.numbers.growth_per_step_bytes)).toBeGreaterThan(0);
    expect(exposition(doc)).toContain(`gpumem_finding_active{${processLabels(doc, p)},finding="growth",severity="warning"} 1`);
  });
});
