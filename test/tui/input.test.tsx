// The screens' keys and mouse as a user meets them (ink-testing-library): several keys in one read,
// the pause and its mark, Home/End/g/G, reverse sort, mouse clicks and wheel, findings whole, kill.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { processInfo } from "../../src/collect/procfs";
import { signalProcess } from "../../src/collect/signal";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import type { Document } from "../../src/system/schema";
import training from "../fixtures/h100-training.json";
import { replayed } from "../support/replayed";
import { settle } from "../support/settle";


const tick = () => settle();
const base = training as unknown as Document;
/** Ten processes on one GPU, pid 1000 using the least memory and pid 1009 the most. */
const tenProcesses: Document = { ...base, processes: Array.from({ length: 10 }, (_, i) => ({ ...base.processes[0]!, pid: 1000 + i, used_bytes: (i + 1) * 2 ** 28 })) };

function overview(doc: Document = tenProcesses, size = { columns: 120, rows: 40 }) {
  const ctl = new Controller(null, 1000);
  ctl.doc = doc;
  const ui = render(<App ctl={ctl} ascii={false} size={size} />);
  const press = async (data: string) => (ui.stdin.write(data), await tick());
  /** The selected row, as the kill prompt names it. */
  const selectedPid = async () => {
    await press("k");
    const pid = /stop (\d+) /.exec(ui.lastFrame()!)?.[1];
    await press("\x1b"); // cancels
    return Number(pid);
  };
  return { ctl, ui, press, selectedPid, status: () => ui.lastFrame()!.split("\n").at(-1)! };
}

describe("keys that arrive in one read", () => {
  test("4 and 3 in one read end on screen 3; +++ steps the interval three times up its ladder (to its top); arrows among letters each count", async () => {
    const { ui, press, selectedPid, ctl } = overview();
    await press("43");
    expect(ui.lastFrame()).toContain("[3 Tensors]");
    await press("1");
    await press("+++");
    expect(ctl.intervalMs).toBe(5000);
    expect(ui.lastFrame()).toContain("interval 5000 ms");
    await press("--");
    expect(ctl.intervalMs).toBe(1000);
    // Down, down, j and an arrow up in one read: the third row.
    await press("\x1b[B\x1b[Bj\x1b[A");
    expect(await selectedPid()).toBe(1009 - 2);
    ui.unmount();
  });
});

describe("pause", () => {
  test("p says paused, the mark stays through other messages, and p again resumes", async () => {
    const { ui, press, ctl, status } = overview();
    await press("p");
    expect(ctl.paused).toBe(true);
    expect(status()).toStartWith("PAUSED paused: nothing is read until space or p resumes");
    await press("+");
    expect(status()).toStartWith("PAUSED interval 2000 ms");
    await press(" ");
    expect(ctl.paused).toBe(false);
    expect(status().trim()).toBe("resumed");
    ui.unmount();
  });
});

describe("moving the selection", () => {
  test("G and End go to the last row, g and Home to the first, Page Down stops at the last", async () => {
    const { ui, press, selectedPid } = overview();
    await press("G");
    expect(await selectedPid()).toBe(1000);
    await press("g");
    expect(await selectedPid()).toBe(1009);
    await press("\x1b[F");
    expect(await selectedPid()).toBe(1000);
    await press("\x1b[H");
    expect(await selectedPid()).toBe(1009);
    await press("\x1b[6~\x1b[6~");
    expect(await selectedPid()).toBe(1000);
    await press("\x1b[A");
    expect(await selectedPid()).toBe(1001); // one up from the last, not from past it
    ui.unmount();
  });
});

describe("sorting", () => {
  test("I reverses the sort, the header says so and marks the column; s moves to the next column shown", async () => {
    const { ui, press, selectedPid } = overview();
    expect(ui.lastFrame()).toContain("GPU MEM▼");
    expect(ui.lastFrame()).toContain("(sort: memory)");
    await press("I");
    expect(ui.lastFrame()).toContain("GPU MEM▲");
    expect(ui.lastFrame()).toContain("(sort: memory, reversed)");
    expect(await selectedPid()).toBe(1000); // the smallest first
    await press("s"); // GPU MEM's neighbour on the screen
    expect(ui.lastFrame()).toContain("ALLOCATED▼");
    expect(ui.lastFrame()).toContain("(sort: allocated)");
    await press("I");
    expect(ui.lastFrame()).toContain("ALLOCATED▲");
    ui.unmount();
  });
});

describe("sorting by the process columns", () => {
  // Four processes whose SM %, CPU %, host memory and run time each put another one first.
  const figures = [
    { pid: 2001, gpu_sm_percent: 90, cpu_percent: 10, host_memory_bytes: 2 ** 30, run_time_seconds: 60 },
    { pid: 2002, gpu_sm_percent: 5, cpu_percent: 300, host_memory_bytes: 2 ** 29, run_time_seconds: 30 },
    { pid: 2003, gpu_sm_percent: null, cpu_percent: 50, host_memory_bytes: 8 * 2 ** 30, run_time_seconds: 10 },
    { pid: 2004, gpu_sm_percent: 40, cpu_percent: null, host_memory_bytes: null, run_time_seconds: 86400 },
  ];
  const doc: Document = { ...base, processes: figures.map((f, i) => ({ ...base.processes[0]!, ...f, used_bytes: (i + 1) * 2 ** 28 })) };

  test("a click on SM%, CPU%, HOST MEM or TIME sorts by it, largest first (unknown last), and again reverses; s steps through the columns shown", async () => {
    const { ui, press, selectedPid } = overview(doc, { columns: 160, rows: 40 });
    const lines = ui.lastFrame()!.split("\n");
    const header = lines.findIndex((l) => l.startsWith("PID")) + 1;
    const order = () => ui.lastFrame()!.split("\n").flatMap((l) => (/^200\d /.test(l) ? [Number(l.slice(0, 4))] : []));
    const click = (title: string) => press(`\x1b[<0;${lines[header - 1]!.indexOf(title) + 2};${header}M`);
    await click("SM%");
    expect(ui.lastFrame()).toContain("SM%▼");
    expect(ui.lastFrame()).toContain("(sort: sm)");
    expect(order()).toEqual([2001, 2004, 2002, 2003]);
    await click("SM%");
    expect(ui.lastFrame()).toContain("(sort: sm, reversed)");
    expect(order()).toEqual([2003, 2002, 2004, 2001]);
    expect(await selectedPid()).toBe(2003);
    await click("CPU%");
    expect(order()).toEqual([2002, 2003, 2001, 2004]);
    await click("HOST MEM");
    expect(ui.lastFrame()).toContain("HOST MEM▼");
    expect(order()).toEqual([2003, 2001, 2002, 2004]);
    await click("TIME");
    expect(ui.lastFrame()).toContain("(sort: time)");
    expect(order()).toEqual([2004, 2001, 2002, 2003]);
    await click("GPU MEM");
    expect(order()).toEqual([2004, 2003, 2002, 2001]);
    await press("ssss"); // allocated, reserved, CPU%, HOST MEM: the columns shown, in their order
    expect(ui.lastFrame()).toContain("(sort: host)");
    await press("s");
    expect(ui.lastFrame()).toContain("(sort: time)");
    expect(order()).toEqual([2004, 2001, 2002, 2003]);
    ui.unmount();
  });
});

describe("mouse", () => {
  test("a click selects the row under it, the wheel scrolls, a click on a column header sorts by it and again reverses, a click on a tab switches", async () => {
    const { ui, press, selectedPid } = overview();
    const lines = ui.lastFrame()!.split("\n");
    const y = lines.findIndex((l) => l.startsWith("1004 ")) + 1; // terminal rows count from 1
    await press(`\x1b[<0;3;${y}M\x1b[<0;3;${y}m`);
    expect(await selectedPid()).toBe(1004);
    await press("\x1b[<65;3;10M");
    expect(await selectedPid()).toBe(1001);
    await press("\x1b[<64;3;10M\x1b[<64;3;10M");
    expect(await selectedPid()).toBe(1007);
    const header = lines.findIndex((l) => l.startsWith("PID")) + 1;
    const x = lines[header - 1]!.indexOf("ALLOCATED") + 2;
    await press(`\x1b[<0;${x};${header}M`);
    expect(ui.lastFrame()).toContain("(sort: allocated)");
    await press(`\x1b[<0;${x};${header}M`);
    expect(ui.lastFrame()).toContain("(sort: allocated, reversed)");
    const tab = lines[0]!.indexOf("5 Lines") + 1;
    await press(`\x1b[<0;${tab};1M`);
    expect(ui.lastFrame()).toContain("[5 Lines]");
    ui.unmount();
  });
});

describe("findings", () => {
  test("each finding whole at 80 columns, once; Enter opens its evidence and numbers, Esc goes back", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("no-zero-grad");
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 80, rows: 24 }} initialScreen="process" />);
    await tick();
    expect(ui.lastFrame()).toContain("warning: gradients kept across steps (zero_grad missing?)");
    ui.stdin.write("\r"); // Enter on Process: the findings, whole
    await tick();
    const frame = ui.lastFrame()!;
    expect(frame).toContain("[6 Findings]");
    expect(frame.split("\n").filter((l) => l.includes("gradients kept across steps")).length).toBe(1);
    const text = frame.split("\n").map((l) => l.trim()).join(" ");
    // The evidence to its last words, wrapped, nothing cut.
    expect(text).toContain("optimizer.zero_grad() is not called every step.");
    expect(text).toContain("or with deliberate accumulation over steps.)");
    for (const l of frame.split("\n")) expect([...l].length).toBeLessThanOrEqual(80);
    ui.stdin.write("\r");
    await tick();
    expect(ui.lastFrame()).toContain("held_bytes");
    expect(ui.lastFrame()).toContain("6.03 MiB (6324736)");
    expect(ui.lastFrame()).toContain("steps_with_held_gradients");
    ui.stdin.write("\x1b");
    await settle(100); // a lone Esc waits a moment for a sequence
    expect(ui.lastFrame()).not.toContain("held_bytes");
    ui.unmount();
  });
});

describe("kill", () => {
  const own = (command: string[]) => Bun.spawn(command, { stdout: "ignore", stderr: "ignore" });

  test("k, t, y sends SIGTERM to the selected process and says so; any other key leaves it running", async () => {
    const child = own(["sleep", "60"]);
    const doc: Document = { ...base, processes: [{ ...base.processes[0]!, pid: child.pid, name: "sleep", command: "sleep 60", used_bytes: 2 ** 30 }] };
    const { ui, press, status } = overview(doc);
    await press("k");
    expect(status()).toContain(`stop ${child.pid} sleep: t SIGTERM (asks it to end), 9 SIGKILL (ends it at once), any other key cancels`);
    await press("x");
    expect(status()).toContain(`pid ${child.pid} left running`);
    await press("k9");
    expect(status()).toContain(`send SIGKILL to ${child.pid} sleep? y / n`);
    await press("n");
    expect(status()).toContain("left running");
    expect(child.killed || child.exitCode !== null).toBe(false);
    await press("kty");
    expect(status()).toContain(`SIGTERM sent to pid ${child.pid} (sleep)`);
    expect(await child.exited).toBe(143);
    expect(child.signalCode).toBe("SIGTERM");
    ui.unmount();
  });

  test("another user's process is refused with a clear message; a pid now running another program is left alone", async () => {
    const child = own(["sleep", "60"]);
    try {
      // Until its exec completes the child's command line is bun's, or briefly none at all.
      for (let i = 0; i < 200 && processInfo(child.pid).command !== "sleep 60"; i++) await Bun.sleep(5);
      // As a user other than the process's owner (uid 12345 owns nothing here).
      const r = signalProcess(child.pid, "SIGKILL", { uid: 12345 });
      expect(r).toEqual({ ok: false, message: expect.stringMatching(new RegExp(`^pid ${child.pid} belongs to user \\S+, not to you: only your own processes can be stopped \\(nothing sent\\)$`)) });
      const reused = signalProcess(child.pid, "SIGKILL", { command: "python train.py" });
      expect(reused.message).toBe(`pid ${child.pid} now runs another program (sleep 60): nothing sent`);
      expect(signalProcess(process.pid, "SIGKILL").message).toContain("is this monitor");
      expect(signalProcess(2 ** 22 + 17, "SIGTERM").message).toContain("is not running here");
      expect(child.exitCode).toBe(null);
    } finally {
      child.kill();
    }
  });

  test("a replay cannot be killed: k says why", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} initialScreen="process" />);
    await tick();
    ui.stdin.write("k");
    await tick();
    expect(ui.lastFrame()).toContain("k: pid 4242 is a replay: there is no process to stop");
    ui.unmount();
  });
});
