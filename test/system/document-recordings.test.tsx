// Every committed recording makes the same documents as the code of the day they were captured:
// through the sampling session (`--json --once`, `--json`, `run --json`'s last line and `serve` read
// it), its Prometheus text (`serve`), and the demo's recorded machine on the Overview (the screens).
// The captures (test/fixtures/documents/) were written by this file with GPUMEM_WRITE_DOCUMENTS=1
// on the code before the document was built in one pass; only what belongs to the run (the pid of
// the stand-in process, its /proc figures, the time, the host) is left out of the comparison.
import { afterAll, describe, expect, test } from "bun:test";
import { closeSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync, writeSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { render } from "ink-testing-library";
import { DEMO_RING, figuresAtSamples, readTrack, RecordedMachine } from "../../src/collect/demo";
import type { ProcessModel } from "../../src/collect/live";
import { ownPidNamespace } from "../../src/collect/procfs";
import { openRingRecording } from "../../src/collect/recording";
import { Session } from "../../src/collect/session";
import { liveModels } from "../../src/commands/live-models";
import { Machine } from "../../src/collect/machine";
import { exposition } from "../../src/headless/prometheus";
import { serialize } from "../../src/headless/stream";
import { createModel, replay } from "../../src/profiler";
import { DocumentSchema, type Document } from "../../src/system/schema";
import { App } from "../../src/tui/app";
import { noDriverTest } from "../support/gpu";
import { Controller } from "../../src/tui/controller";
import { settle } from "../support/settle";

const FIX = join(import.meta.dir, "..", "fixtures");
const OUT = join(FIX, "documents");
const WRITE = process.env.GPUMEM_WRITE_DOCUMENTS === "1";
/** Each committed ring with its manifest. */
const RECORDINGS: Array<[string, string, string]> = [
  ["normal", join(FIX, "normal.ring"), join(FIX, "normal.json")],
  ["hf-gpt2", join(FIX, "hf-gpt2.ring"), join(FIX, "hf-gpt2.json")],
  ["oom", join(FIX, "oom.ring"), join(FIX, "oom.json")],
  ["kept-loss-graph", join(FIX, "kept-loss-graph.ring"), join(FIX, "kept-loss-graph.json")],
  ["no-zero-grad", join(FIX, "no-zero-grad.ring"), join(FIX, "no-zero-grad.json")],
  ["normal-history", join(FIX, "normal-history.ring"), join(FIX, "normal-history.json")],
  ["hf-gpt2-leak", join(FIX, "hf-gpt2-leak.ring.gz"), join(FIX, "hf-gpt2-leak.json")],
  ["demo", DEMO_RING, DEMO_RING.replace(/\.ring\.gz$/, ".json")],
];

const started: Bun.Subprocess[] = [];
afterAll(() => {
  for (const p of started) p.kill();
});

/** The capture `name` checked (or written, with GPUMEM_WRITE_DOCUMENTS=1). */
function same(name: string, got: unknown): void {
  const path = join(OUT, name);
  if (WRITE) {
    mkdirSync(OUT, { recursive: true });
    writeFileSync(path, typeof got === "string" ? got : `${JSON.stringify(got, null, 1)}\n`);
    return;
  }
  const want = readFileSync(path, "utf8");
  if (typeof got === "string") expect(got).toBe(want);
  else expect(got).toEqual(JSON.parse(want));
}

/** The document as printed, without what belongs to the run: `pid` (the stand-in process) reads
 *  PID, and the time, the host and /proc's figures of the stand-in are left out. */
function printed(doc: Document, pid: number): unknown {
  const d = DocumentSchema.parse(JSON.parse(serialize(doc)));
  const swap = (x: unknown): unknown => {
    if (x === pid) return "PID";
    if (Array.isArray(x)) return x.map(swap);
    if (x && typeof x === "object") return Object.fromEntries(Object.entries(x).map(([k, v]) => [k, swap(v)]));
    return x;
  };
  for (const p of d.processes) Object.assign(p, { cpu_percent: null, host_memory_bytes: null, run_time_seconds: null, user: null, name: null, command: null, pid_namespace: null });
  return swap({ ...d, time_unix_ms: 0, host: "" });
}

/** An agent directory holding the recording as the ring and manifest of a stand-in process. */
function agentDir(ring: string, manifest: string, pid: number): string {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-docs-")), "agents");
  mkdirSync(dir, { mode: 0o700 });
  const path = join(dir, `${pid}.ring`);
  if (ring.endsWith(".gz")) writeFileSync(path, Bun.gunzipSync(readFileSync(ring)));
  else copyFileSync(ring, path);
  const fd = openSync(path, "r+");
  const b = Buffer.alloc(4);
  b.writeInt32LE(pid);
  writeSync(fd, b, 0, 4, 32); // gpumem_header.pid
  closeSync(fd);
  const m = { ...JSON.parse(readFileSync(manifest, "utf8")), pid, ring: path, socket: null, pid_namespace: ownPidNamespace() };
  writeFileSync(join(dir, `${pid}.json`), JSON.stringify(m), { mode: 0o600 });
  return dir;
}

describe("the session's documents of every committed recording", () => {
  for (const [name, ring, manifest] of RECORDINGS) {
    noDriverTest(`${name}: while it runs, once it has exited, and as Prometheus text`, async () => {
      const p = Bun.spawn(["sleep", "60"]);
      started.push(p);
      const dir = agentDir(ring, manifest, p.pid);
      const session = new Session(new Machine({ agentDir: dir }), liveModels({ keepTrace: false }));
      try {
        // A first tick reads at most a tick's records; the next ones go on where it stopped.
        const docs = [session.tick(1_800_000_000_000, { oneShot: true }), session.tick(1_800_000_001_000), session.tick(1_800_000_002_000)];
        p.kill();
        await p.exited;
        // Exited: its ring read to the end, as `run --json`'s last line has it.
        docs.push(session.tick(1_800_000_003_000));
        expect(docs.at(-1)!.processes.some((x) => x.exited)).toBe(true);
        // A ring saved with its header's totals (not those cut by tools/ring-cut.ts) has a profile.
        if (session.machine.lastAgents[0]!.header!.totals.length) expect(docs.every((d) => d.processes.some((x) => x.pytorch?.profile))).toBe(true);
        same(`${name}.session.json`, docs.map((d) => printed(d, p.pid)));
        same(`${name}.prom`, docs.map((d) => exposition(d).replaceAll(new RegExp(`\\b${p.pid}\\b`, "g"), "PID").replace(/(hostname|process)="[^"]*"/g, '$1=""').replace(/gpumem_build_info\{[^}]*\}/, "gpumem_build_info{}")).join("\n---\n"));
      } finally {
        session.close();
        rmSync(dirname(dir), { recursive: true, force: true });
      }
    });
  }
});

const SIZE = { columns: 160, rows: 50 };
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

describe("the demo's recorded machine on the Overview", () => {
  test("at a third, two thirds and the end of the replay, alone and beside a machine with a GPU: the recorded GPU and the process row, as drawn", async () => {
    const rec = openRingRecording(DEMO_RING);
    const model = createModel().keepTrace();
    const pm: ProcessModel = { pid: rec.manifest!.pid, model, source: "replay", socket: null, title: `recording of ${rec.manifest!.cmdline.join(" ")}`, ended: false };
    const track = readTrack(DEMO_RING)!;
    const machine = new RecordedMachine(track, pm, figuresAtSamples(DEMO_RING, track));
    const frames: string[] = [];
    /** `beside`: a machine with GPUs of its own (the recorded ones renumbered past them). */
    const draw = async (beside = false) => {
      const ctl = new Controller(null, 1000);
      ctl.replay = pm;
      ctl.recorded = machine;
      const rec = machine.tick();
      ctl.doc = beside ? { ...rec, processes: rec.processes.map((p) => ({ ...p, pid: p.pid + 1 })) } : null;
      const ui = render(<App ctl={ctl} ascii={false} size={SIZE} />);
      try {
        ui.stdin.write("1");
        await settle();
        frames.push(plain(ui.lastFrame()!));
      } finally {
        ui.unmount();
      }
    };
    let n = 0;
    for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model, state_every_us: 1_000_000 })) n++;
    rec.close();
    // Replayed again, drawn at three moments.
    const again = openRingRecording(DEMO_RING);
    pm.model = createModel().keepTrace();
    machine.tick(); // before the first event
    let i = 0;
    const at = new Set([Math.floor(n / 3), Math.floor((2 * n) / 3)]);
    for await (const _ of replay(again.source, { ranges: again.ranges, names: again.names, model: pm.model, state_every_us: 1_000_000 })) {
      if (at.has(i++)) await draw();
    }
    again.close();
    pm.ended = true;
    await draw();
    await draw(true);
    expect(frames.length).toBe(4);
    same("demo.overview.txt", frames.join("\n---\n"));
  });
});

test("the captures are there (GPUMEM_WRITE_DOCUMENTS=1 writes them)", () => {
  expect(existsSync(join(OUT, "demo.overview.txt"))).toBe(true);
});
