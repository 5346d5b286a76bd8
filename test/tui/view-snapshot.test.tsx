// `view FILE` on the screens, as a new user meets it at 80×24 and 200×60 (ink-testing-library, on
// committed torch snapshots): a snapshot is shown as a file, not as a process that ended. It opens
// on Process with its findings; the frame's header names the file, the span it recorded and
// torch's totals; no pid, interval, NVML or retries; its chart's time runs from the recording's
// start. And the words around it: plurals, binary units, an empty filter said as such.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import { progressWords } from "../../src/commands/view";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { VIEW_SCREEN, viewController } from "../../src/tui/main";
import { snapshotHeader } from "../../src/tui/snapshot-header";
import type { Document } from "../../src/system/schema";
import { counted } from "../../src/words";
import training from "../fixtures/h100-training.json";
import { settle } from "../support/settle";

const SNAPS = join(import.meta.dir, "..", "fixtures", "snapshots");
const OOM = join(SNAPS, "oom.pickle.gz");
const tick = () => settle();

async function view(file: string, size: { columns: number; rows: number }) {
  const ctl = await viewController(file, { intervalMs: 1000 });
  const ui = render(<App ctl={ctl} ascii={false} size={size} initialScreen={VIEW_SCREEN} />);
  await tick();
  const press = async (keys: string) => (ui.stdin.write(keys), await tick());
  return { ctl, ui, press, lines: () => ui.lastFrame()!.split("\n") };
}

/** What a live process shows and a snapshot has not. */
const LIVE_ONLY = [/\bpid 0\b/, /replay finished/, /every \d+ ms/, /\bNVML\b/, /\bretries\b/, /non-PyTorch/];

describe("view FILE: a snapshot looks like a snapshot", () => {
  for (const size of [{ columns: 80, rows: 24 }, { columns: 200, rows: 60 }]) {
    test(`${size.columns}×${size.rows}: opens on Process with its findings under a header of the file, its span and torch's totals`, async () => {
      const { ui, lines, press } = await view(OOM, size);
      const [tabs, header] = lines();
      expect(tabs).toContain("[2 Process]");
      expect(header).toStartWith("snapshot ");
      expect(header).toContain("oom.pickle.gz");
      // torch's totals at the end, as its segments hold them (oom.facts.json: 74651648 and 88080384)
      expect(header).toContain("torch: 71.19 MiB allocated of 84.00 MiB reserved");
      if (size.columns >= 200) {
        expect(header).toContain(`snapshot ${OOM} (`);
        expect(header).toMatch(/recorded 522\.\d ms from 20\d\d-\d\d-\d\d \d\d:\d\d:\d\d/);
        expect(header).toContain("in 12 segments");
        // The span said is the span the chart's axis covers.
        const span = /recorded (\S+ ms)/.exec(header!)![1]!;
        expect(lines().some((l) => l.trimEnd().endsWith(` ${span}`) && /^\s+0\s/.test(l))).toBe(true);
      }
      for (const l of lines()) expect(l.length).toBeLessThanOrEqual(size.columns);
      const frame = ui.lastFrame()!;
      for (const word of LIVE_ONLY) expect(frame).not.toMatch(word);
      expect(frame).toContain("error: CUDA out of memory in step 2");
      expect(frame).toContain("peak 83.03 MiB");
      // The time axis in the recording's time: from 0 to its span, never "-0.5 s … end".
      const axis = lines().find((l) => /^\s+0\s+\S/.test(l) && /ms\s*$/.test(l))!;
      expect(axis).toBeDefined();
      expect(axis.trim()).toMatch(/^0 .* 522\.\d ms$/);
      expect(frame).not.toMatch(/-\d+(\.\d+)? s\b/);
      // Each screen names the snapshot where it would name a pid.
      await press("6");
      expect(ui.lastFrame()).toContain("the snapshot: 1 finding, most severe first");
      await press("8");
      expect(ui.lastFrame()).toMatch(/the snapshot {2}step \d/);
      for (const word of LIVE_ONLY) expect(ui.lastFrame()!).not.toMatch(word);
      ui.unmount();
    });
  }

  test("the header keeps torch's totals whole at any width; the path is cut at its start, its end names the file", () => {
    const facts = { file: "/data/runs/exp-17/snapshots/rank0-step-1200.pickle", bytes: 230 * 2 ** 20, entries: 1770, first_time_us: null, last_time_us: null, devices: 1, segments: 1, allocated_bytes: 8 * 2 ** 30, reserved_bytes: 9 * 2 ** 30 };
    expect(snapshotHeader(facts, 200)).toBe(`snapshot ${facts.file} (230.00 MiB)  1770 trace entries, without times  torch: 8.00 GiB allocated of 9.00 GiB reserved in 1 segment`);
    for (const width of [90, 100]) {
      const h = snapshotHeader(facts, width);
      expect(h.length).toBeLessThanOrEqual(width);
      expect(h).toEndWith("torch: 8.00 GiB allocated of 9.00 GiB reserved");
      expect(h).toMatch(/^snapshot …[^ ]*\/rank0-step-1200\.pickle {2}torch/);
    }
    // Narrower, the totals in short, whole; the path cut at its start to what is left.
    expect(snapshotHeader(facts, 79)).toBe("…exp-17/snapshots/rank0-step-1200.pickle  allocated 8.00 GiB  reserved 9.00 GiB");
    expect(snapshotHeader(facts, 60)).toBe("…nk0-step-1200.pickle  allocated 8.00 GiB  reserved 9.00 GiB");
    expect(snapshotHeader({ ...facts, entries: 0 }, 200)).toContain("no trace (taken without memory history)");
  });

  test("a category of one block is `1 block`: counts in the singular where they are one", async () => {
    const { ui, press } = await view(join(SNAPS, "midrun.pickle.gz"), { columns: 120, rows: 40 });
    await press("3");
    expect(ui.lastFrame()).toMatch(/ input +\S+ \S+ +1 block +\d+%/);
    expect(ui.lastFrame()).not.toMatch(/\b1 blocks\b/);
    ui.unmount();
    expect([counted(1, "block"), counted(2, "block"), counted(1, "trace entry", "trace entries"), counted(0, "segment")]).toEqual(["1 block", "2 blocks", "1 trace entry", "0 segments"]);
  });

  test("the progress line of a large file counts in MiB, as its size is said everywhere else", () => {
    expect(progressWords(12 * 2 ** 20, 230 * 2 ** 20)).toBe("12.00 MiB of 230.00 MiB (5%)");
  });
});

describe("an empty filter result", () => {
  test("says that nothing matches the filter, not that the machine has no GPU processes", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = training as unknown as Document;
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} />);
    await tick();
    for (const k of "/zzz-no-such\r") (ui.stdin.write(k), await tick());
    expect(ui.lastFrame()).toContain('no process matches the filter "zzz-no-such"');
    expect(ui.lastFrame()).not.toContain("no GPU processes");
    ui.unmount();
  });
});
