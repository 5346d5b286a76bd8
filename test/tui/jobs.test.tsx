// The Overview of a host running a 4-rank job (rank 3 missing) beside two processes of their own,
// each rank a training run recorded on an H100: the job's row, then its ranks together in rank
// order, at 80 and 120 columns, every line within the terminal.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { overviewProcesses } from "../../src/tui/screens/overview";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { createModel } from "../../src/profiler";
import { Trace } from "../profiler/trace";
import { hostDocument, TORCHRUN } from "../support/jobs";
import { settle } from "../support/settle";

const tick = () => settle();
// Color codes are not part of what a line's width is.
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");

function mount(columns: number, rows: number) {
  const ctl = new Controller(null, 1000);
  ctl.doc = hostDocument(TORCHRUN);
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
  const lines = () => plain(ui.lastFrame()!).split("\n");
  return { ctl, ui, lines };
}

describe("Overview of a multi-rank job", () => {
  for (const [columns, rows] of [
    [80, 24],
    [120, 40],
  ] as const) {
    test(`${columns}x${rows}: the job's row, its notes, then its ranks in rank order; other processes as before`, async () => {
      const { ctl, ui, lines } = mount(columns, rows);
      await tick();
      const frame = lines();
      for (const l of frame) expect(l.length).toBeLessThanOrEqual(columns);
      expect(frame.length).toBeLessThan(rows);
      const job = ctl.doc!.jobs[0]!;
      const header = frame.findIndex((l) => /^job\s/.test(l));
      expect(header).toBeGreaterThan(0);
      // World size and ranks present, totals, the step range.
      expect(frame[header]).toMatch(/ 3\/4 /);
      expect(frame[header]).toContain("681.64 MiB"); // allocated, summed over the ranks
      expect(frame[header]).toContain("836.00 MiB"); // reserved
      expect(frame[header]).toContain("12-20");
      const notes = frame.slice(header + 1).join("\n");
      expect(notes).toContain("python3 train.py --epochs 3 (launcher 4700)");
      expect(notes).toContain("rank 3 missing");
      expect(notes).toContain("rank 2 peaks 384.19 MiB above the others");
      // The ranks together after the notes, indented, in rank order (by memory, rank 2 would lead).
      const rankRows = frame.map((l, i) => [i, l] as const).filter(([, l]) => job.pids.some((pid) => l.startsWith(`  ${pid} `)));
      expect(rankRows.map(([, l]) => Number(l.trim().split(/\s+/)[0]))).toEqual(job.pids);
      expect(rankRows.map(([i]) => i - rankRows[0]![0])).toEqual([0, 1, 2]);
      expect(rankRows[0]![0]).toBeGreaterThan(header);
      expect(frame.slice(header + 1, rankRows[0]![0]).every((l) => l.startsWith("    "))).toBe(true);
      // Processes of no job: unindented, after the job (the sort by memory puts the job first).
      const others = ctl.doc!.processes.filter((p) => !job.pids.includes(p.pid)).map((p) => p.pid);
      for (const pid of others) expect(frame.findIndex((l) => l.startsWith(`${pid} `))).toBeGreaterThan(rankRows[2]![0]);
      ui.unmount();
    });
  }

  test("the selection moves over the processes in the order shown (the ranks in rank order); a filter keeps the job's row over the ranks it leaves", async () => {
    const { ctl, ui, lines } = mount(120, 40);
    await tick();
    const order = overviewProcesses(ctl.doc, "memory", "");
    expect(order.map((p) => p.pid).slice(0, 3)).toEqual(ctl.doc!.jobs[0]!.pids);
    ui.stdin.write("/");
    await tick();
    for (const c of String(ctl.doc!.jobs[0]!.pids[1])) ui.stdin.write(c);
    await tick();
    ui.stdin.write("\r");
    await tick();
    const frame = lines();
    const header = frame.findIndex((l) => /^job\s/.test(l));
    expect(header).toBeGreaterThan(0);
    const shown = frame.filter((l) => /^\s*\d+ /.test(l));
    expect(shown.map((l) => Number(l.trim().split(/\s+/)[0]))).toEqual([ctl.doc!.jobs[0]!.pids[1]!]);
    ui.unmount();
  });
});

describe("Overview of a job after one rank was killed", () => {
  test("80x24: the rank that died first is named, the others said stopped by the launcher; ranks that are gone are not called behind", async () => {
    const t = 1_795_000_000_000;
    const ctl = new Controller(null, 1000);
    // Four ranks of one torchrun, every ring left open; rank 1's agent fell silent 3 s before the others'.
    ctl.doc = hostDocument(["normal", "no-zero-grad", "kept-loss-graph", "oom"].map((fixture, rank) => ({ fixture, rank, world_size: 4, ppid: 4700, device: rank, exited: true, closed: false, heard_unix_ms: rank === 1 ? t - 3000 : t })), 4, { profiles: true });
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 80, rows: 24 }} />);
    await tick();
    const frame = plain(ui.lastFrame()!);
    expect(frame).toContain("incomplete: rank 1 died first (killed or crashed)");
    expect(frame).toContain("ranks 0, 2-3 stopped by the launcher");
    expect(frame).not.toContain("killed or crashed;");
    expect(frame).not.toContain("behind");
    ui.unmount();
  });
});

describe("keys in one read", () => {
  test("a burst of keys (tmux send-keys, a paste, key repeat over SSH) counts every key, in order", async () => {
    const { ctl, ui, lines } = mount(120, 40);
    for (const p of ctl.doc!.processes) {
      const model = createModel();
      model.ingest(new Trace().alloc(0x1000, 1 << 20).batch());
      ctl.models.byPid.set(p.pid, { pid: p.pid, model, source: "live", socket: null, title: `pid ${p.pid}`, ended: false });
    }
    // The store shows the agents' models from its next tick on (a session adds them in one).
    await ctl.tick();
    await tick();
    const order = overviewProcesses(ctl.doc, "memory", "");
    const opened = () => Number(/pid (\d+) \[/.exec(lines().join("\n"))?.[1]);
    // Down twice and Enter in one read: the third process opens.
    ui.stdin.write("jj\r");
    await tick();
    expect(lines()[0]).toContain("[2 Process]");
    expect(opened()).toBe(order[2]!.pid);
    // Back, up twice (arrows), down once, in one read: the second.
    ui.stdin.write("1\x1b[A\x1b[Aj");
    await tick();
    ui.stdin.write("\r");
    await tick();
    expect(opened()).toBe(order[1]!.pid);
    // "43" in one read: Segments, then Tensors
    ui.stdin.write("43");
    await tick();
    expect(lines()[0]).toContain("[3 Tensors]");
    // "/" and text in one read: the text is the filter
    ui.stdin.write(`1/${order[1]!.pid}`);
    await tick();
    expect(lines().at(-1)).toContain(`filter: ${order[1]!.pid}`);
    ui.unmount();
  });
});
