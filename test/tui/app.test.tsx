// The screens as a user sees them, rendered by Ink (ink-testing-library), on a model fed with a
// training run recorded on an H100 (test/fixtures/normal.ring).
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { blocks } from "../../src/profiler";
import { formatBytes } from "../../src/words";
import { unpickle } from "../../src/snapshot/pickle";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { SCREENS } from "../../src/tui/registry";
import type { Document } from "../../src/system/schema";
import training from "../fixtures/h100-training.json";
import { until } from "../support/clock";
import { replayed } from "../support/replayed";
import { settle } from "../support/settle";


const tick = () => settle();
const SIZE = { columns: 120, rows: 40 };

describe("screens", () => {
  test("Overview of a recorded H100 document: GPU panel and the PyTorch process with its allocator", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = training as unknown as Document;
    const ui = render(<App ctl={ctl} ascii={false} size={SIZE} />);
    await tick();
    const frame = ui.lastFrame()!;
    expect(frame).toContain("GPU 0");
    expect(frame).toContain("NVIDIA H100 80GB HBM3");
    const p = ctl.doc.processes[0]!;
    expect(frame).toContain(String(p.pid));
    expect(frame).toContain("64.02 MiB"); // allocated by the agent's totals
    expect(frame.split("\n").length).toBeLessThan(SIZE.rows); // never a full-height frame
    ui.unmount();
  });

  test("no GPU: the Overview offers the demo (D), and once it runs says where it plays", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = { ...(training as unknown as Document), devices: [], processes: [], reason: "no NVIDIA driver (libnvidia-ml.so.1) on this machine" };
    const ui = render(<App ctl={ctl} ascii={false} size={SIZE} />);
    await tick();
    expect(ui.lastFrame()).toContain("No GPU here: no NVIDIA driver (libnvidia-ml.so.1) on this machine. Press D for a replay");
    ctl.replay = await replayed("normal");
    ctl.notify();
    await tick();
    expect(ui.lastFrame()).toContain("The normal.ring plays on 2 Process.");
    expect(ui.lastFrame()).not.toContain("Press D");
    ui.unmount();
  });

  test("number keys and Tab switch screens; ? is help", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={false} size={SIZE} />);
    await tick();
    // A replay samples no machine: the Overview says so and shows the replayed process as its row.
    expect(ui.lastFrame()).toContain("No GPU here: this mode samples no GPUs. The normal.ring plays on 2 Process.");
    expect(ui.lastFrame()).toMatch(/^4242 .* 83\.10 MiB 144\.00 MiB .*\[recorded\] normal\.ring/m);
    ui.stdin.write("2");
    await tick();
    expect(ui.lastFrame()).toContain("[2 Process]");
    expect(ui.lastFrame()).toContain("allocated 83.10 MiB");
    expect(ui.lastFrame()).toContain("step 20  phase outside"); // the schema's "other" phase, named apart from the category
    // torch's block sizes (issue 36): the records reach torch's peak, 126.22 MiB (125.22 with requested sizes).
    expect(ui.lastFrame()).toMatch(/Step 19: peak 126\.22 MiB in backward/);
    ui.stdin.write("\t");
    await tick();
    expect(ui.lastFrame()).toContain("[3 Tensors]");
    expect(ui.lastFrame()).toContain("Live memory by category");
    ui.stdin.write("4");
    await tick();
    expect(ui.lastFrame()).toMatch(/\d+ segments/);
    ui.stdin.write("?");
    await tick();
    expect(ui.lastFrame()).toContain("gpumem-tui keys");
    ui.unmount();
  });

  test("the tensor table sorts by size, then by time, then by address: the rows on screen come in that order", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={true} size={SIZE} initialScreen="tensors" />);
    await tick();
    // A block's row as the user reads it: the count of a group ("3 ×", its own column), SIZE,
    // CATEGORY, and at 120 columns AGE; a group of alike blocks is read as its first block.
    const header = () => ui.lastFrame()!.split("\n").find((l) => l.includes("CATEGORY") && l.includes("NAME"))!;
    const rows = () => {
      const lines = ui.lastFrame()!.split("\n");
      const ageAt = header().indexOf("AGE") + 3;
      return lines
        .slice(lines.indexOf(header()) + 1)
        .map((l) => ({ l, m: /^\s*(?:\d+ × )?\s*([\d.]+ (?:B|KiB|MiB|GiB)) (\S+)/.exec(l) }))
        .filter((r) => r.m)
        .map(({ l, m }) => ({ size: m![1]!, category: m![2]!, age: Number(l.slice(ageAt - 8, ageAt).trim().replace(/s$/, "")) }));
    };
    const toBytes = (s: string) => Number(s.split(" ")[0]) * { B: 1, KiB: 1024, MiB: 1024 ** 2, GiB: 1024 ** 3 }[s.split(" ")[1] as "B"];
    // The same blocks from the model, put in each order here, independently of the screen's sort.
    const all = blocks(ctl.replay.model, { limit: Infinity }).blocks;
    const bySize = rows();
    expect(bySize.length).toBeGreaterThan(5);
    expect(bySize.map((r) => toBytes(r.size))).toEqual([...bySize.map((r) => toBytes(r.size))].sort((a, b) => b - a));
    expect(toBytes(bySize[0]!.size)).toBe(Math.max(...all.map((b) => b.size_bytes)));
    // s steps through the columns shown, in their order, each marked in its own header, and no other.
    const marked = () => header().match(/[A-Z]+▼/g);
    // (normal.ring's blocks carry no shape or dtype: those columns are not shown, nor sorted by.)
    for (const title of ["CATEGORY", "NAME", "AGE"]) {
      ui.stdin.write("s");
      await until(() => header().includes(`${title}▼`));
      expect(marked()).toEqual([`${title}▼`]);
    }
    const byTime = rows();
    // Newest first: the ages read down the table never fall, and the first row is the newest block.
    expect(byTime.map((r) => r.age)).toEqual([...byTime.map((r) => r.age)].sort((a, b) => a - b));
    const newest = [...all].sort((a, b) => b.time_us - a.time_us)[0]!;
    expect(byTime[0]).toMatchObject({ size: formatBytes(newest.size_bytes), category: newest.category });
    expect(byTime.map((r) => r.size)).not.toEqual(bySize.map((r) => r.size));
    ui.unmount();
  });

  test("the forgotten zero_grad run says so on the Process screen", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("no-zero-grad");
    const ui = render(<App ctl={ctl} ascii={true} size={SIZE} initialScreen="process" />);
    await tick();
    expect(ui.lastFrame()!.toLowerCase()).toContain("gradient");
    expect(ui.lastFrame()).not.toContain("nothing wrong found");
    ui.unmount();
  });

  test("the Process chart: phases as a band under the curves, the OOM marked where it happened", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("oom");
    const ui = render(<App ctl={ctl} ascii={true} size={SIZE} initialScreen="process" />);
    await tick();
    const lines = ui.lastFrame()!.split("\n");
    // The strip under the charts says what it is ("phase" in the axis' gutter).
    // Its steps are shorter than a column: backward holds no column whole, so it is drawn among the
    // mixed columns (ASCII ".", issue 39's truthful strip) and the legend gives its share of them.
    const band = lines.find((l) => /^ +phase [ .oFBO-]+$/.test(l) && /F-*/.test(l) && l.includes("."));
    expect(band).toBeDefined();
    expect(lines.some((l) => /^ +phase: \. phases mixed in a [\d.]+ ms column: F \d+% B \d+%/.test(l))).toBe(true);
    expect(lines.some((l) => /OOM X|X OOM/.test(l))).toBe(true);
    // The OOM came between steps: the finding says so in words, not as a phase called "other".
    expect(ui.lastFrame()!).toContain("error: CUDA out of memory in step 2, outside forward, backward and the optimizer");
    ui.unmount();
  });

  test("d on a replay writes a snapshot from the monitor's events; e explains why it cannot run; the filter narrows the table", async () => {
    const ctl = new Controller(null, 1000);
    ctl.snapshotDir = mkdtempSync(join(tmpdir(), "gpumem-app-"));
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={true} size={{ columns: 200, rows: 40 }} initialScreen="tensors" />);
    await tick();
    ui.stdin.write("d");
    for (let i = 0; i < 50 && !ui.lastFrame()!.includes("memory_viz"); i++) await tick();
    const path = join(ctl.snapshotDir, readdirSync(ctl.snapshotDir)[0]!);
    expect(path).toMatch(/4242-snapshot-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d(-\d+)?\.pickle$/);
    // The sentence, then the whole path on a line of its own (issue 39: d's path in full, the
    // screen giving up a line), where one line cannot hold both whole.
    const [sentence, status] = ui.lastFrame()!.split("\n").slice(-2) as [string, string];
    expect(sentence).toMatch(/^snapshot of pid 4242: [\d.]+ MiB, \d+ trace entries from \d+ records/);
    expect(status.trimEnd()).toBe(path);
    expect(ui.lastFrame()!.split("\n").length).toBeLessThan(40);
    const snap = unpickle(new Uint8Array(readFileSync(path))) as { segments: unknown[]; device_traces: unknown[][] };
    expect(snap.segments.length).toBeGreaterThan(0);
    expect(snap.device_traces[0]!.length).toBeGreaterThan(1000);
    ui.stdin.write("e");
    await tick();
    expect(ui.lastFrame()).toContain("empty_cache: pid 4242 is a replay: there is no process to ask");
    const tableRows = () => ui.lastFrame()!.split("\n").filter((l) => / (forward|backward|optimizer|other) +\d+ /.test(l));
    const before = tableRows().length;
    ui.stdin.write("/");
    await tick();
    for (const c of "backward") ui.stdin.write(c);
    await tick();
    ui.stdin.write("\r");
    await tick();
    const rows = tableRows();
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.length).toBeLessThan(before);
    for (const r of rows) expect(r).toContain("backward");
    expect(ui.lastFrame()).toContain('kept by the filter "backward"');
    ui.unmount();
  });
});

describe("every screen fits the terminal", () => {
  // Eight copies of the H100 recorded on the device and 50 processes: the busiest Overview.
  const base = training as unknown as Document;
  const busy: Document = {
    ...base,
    devices: Array.from({ length: 8 }, (_, i) => ({ ...base.devices[0]!, index: i, uuid: `${base.devices[0]!.uuid}-${i}` })),
    processes: Array.from({ length: 50 }, (_, i) => ({ ...base.processes[0]!, pid: 1000 + i, device: i % 8, used_bytes: (i + 1) * 2 ** 28 })),
  };
  for (const [columns, rows] of [[80, 24], [100, 30], [200, 60]] as const) {
    test(`${columns}×${rows}: no line wider than the terminal, the frame a line shorter than it, the tab line first`, async () => {
      const ctl = new Controller(null, 1000);
      ctl.doc = busy;
      ctl.replay = await replayed("oom");
      ctl.status = "x".repeat(1000); // a long status is cut to one line: the screen above keeps every line
      const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
      for (const key of SCREENS.map((s) => s.key)) {
        ui.stdin.write(key);
        // Rendered when the tab line shows the key's screen (a loaded machine renders late).
        await until(() => ui.lastFrame()!.split("\n")[0]!.includes(`[${key} `));
        const lines = ui.lastFrame()!.split("\n");
        expect({ key, lines: lines.length }).toEqual({ key, lines: Math.min(lines.length, rows - 1) });
        for (const l of lines) expect({ key, l, width: [...l].length }).toEqual({ key, l, width: Math.min([...l].length, columns) });
        expect(lines[0]).toContain(`[${key} `);
        expect(lines.filter((l) => /^x+…$/.test(l)).length).toBe(1);
        if (key === "2") {
          // Nothing squeezed out: the title, the headline and the phase table are all there.
          expect(lines[1]).toContain("pid 4242");
          expect(lines[2]).toContain("allocated");
          expect(lines.some((l) => l.includes("SHARE OF PEAK"))).toBe(true);
        }
        if (key === "3") {
          // One line a block: every row starts with its size, none wraps; oom.ring's blocks carry no
          // shape or dtype, so those columns, which would stay empty, give NAME their room.
          const header = lines.findIndex((l) => l.includes("SIZE▼ CATEGORY")); // the sort column marked
          expect(lines[header]).not.toContain("SHAPE");
          expect(lines[header]).toContain("NAME");
          const body = lines.slice(header + 1).filter((l) => l.trim() && !/^x+…?$/.test(l));
          expect(body.length).toBeGreaterThan(3);
          for (const l of body) expect(l).toMatch(/^\s*(\d+ × )?\s*\d+(\.\d+)? (B|KiB|MiB|GiB) /);
          // an unnamed block says what it is, never a bare address
          for (const l of body) expect(l).not.toMatch(/\b0x[0-9a-f]{6,}\b/);
        }
      }
      ui.unmount();
    });
  }
});

describe("a DDP rank on its second GPU", () => {
  test("events on cuda:1 only, the neighbour GPU in the header with nothing: the Process screen shows cuda:1 and does not fail", async () => {
    const { createModel, summary } = await import("../../src/profiler");
    const { Trace } = await import("../profiler/trace");
    const tr = new Trace();
    tr.device = 1;
    tr.segment(0x7000_0000, 20 * 2 ** 20).alloc(0x7000_0000, 2 ** 20).nextStep();
    const model = createModel();
    model.ingest(tr.batch());
    const zero = { allocated: 0, reserved: 0, active: 0, peak_allocated: 0, peak_reserved: 0, peak_active: 0, n_alloc: 0, n_free: 0, n_segment_alloc: 0, n_segment_free: 0, n_oom: 0, n_retries: 0, requested: 0 };
    model.setHeader({
      abi_version: 1, capacity: 1024, pid: 751, mode: "hook", n_devices: 2, attach_unix_us: 0, updated_unix_us: 0, current_step: 1, current_range: 0,
      current_line: 0, current_phase: 0, closed: false, write_index: tr.rows.length,
      totals: [{ device: 0, ...zero }, { device: 1, ...zero, allocated: 2 ** 20, reserved: 20 * 2 ** 20, n_alloc: 1 }],
    });
    expect(summary(model).devices.map((d) => d.device)).toEqual([1]);
    const ctl = new Controller(null, 1000);
    ctl.replay = { pid: 751, model, source: "replay", socket: null, title: "rank 1", ended: false };
    const ui = render(<App ctl={ctl} ascii={false} size={SIZE} initialScreen="process" />);
    await tick();
    expect(ui.lastFrame()).toContain("pid 751");
    expect(ui.lastFrame()).toContain("allocated 1.00 MiB");
    ui.unmount();
  });
});
