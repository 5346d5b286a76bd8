// htop's and nvtop's habits, and the finding where the eye is, on screens rendered by Ink: F1 help,
// F3 search, F4 filter, F6 sort, F9 kill (never Help's `k`), Esc back to the screen Enter came from
// and a kept filter cleared first, `+` / `-` along a fixed ladder; on the Overview, a process
// leaking every step (a real GPT-2 leak recorded on an H100, test/fixtures/hf-gpt2-leak.ring.gz,
// replayed to its end through the model) marked on its row and on its job's row, its finding's
// title on the status line when selected, the findings counted in the header.
import { beforeAll, describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { join } from "node:path";
import type { ProcessModel } from "../../src/collect/live";
import { openRecording } from "../../src/collect/recording";
import { createModel, findings } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { recordFields } from "../../src/system/manifest";
import { App } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { KEYS } from "../../src/tui/screens/help";
import { hostDocument, TORCHRUN } from "../support/jobs";
import { replayed } from "../support/replayed";
import { settle } from "../support/settle";

const LEAK = join(import.meta.dir, "..", "fixtures", "hf-gpt2-leak.ring.gz");
const tick = () => settle();
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
/** Function keys as xterm and tmux send them. */
const F = { 1: "\x1bOP", 3: "\x1bOR", 4: "\x1bOS", 6: "\x1b[17~", 9: "\x1b[20~", 10: "\x1b[21~" } as const;

let leak: ProcessModel;
beforeAll(async () => {
  const rec = await openRecording(LEAK);
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, ...recordFields(rec.manifest), model })) {
    // to the end
  }
  leak = { pid: rec.manifest!.pid, model, source: "replay", socket: null, title: `replay of ${LEAK}`, command: rec.manifest!.cmdline.join(" "), ended: true };
  rec.close();
});

function mount(ctl: Controller, columns = 120, rows = 40, initialScreen: "overview" | "process" | "tensors" = "overview") {
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen={initialScreen} />);
  const frame = () => plain(ui.lastFrame()!).split("\n");
  const keys = async (...ks: string[]) => {
    for (const k of ks) {
      ui.stdin.write(k);
      // A lone Esc is told from a sequence 50 ms later.
      await tick();
      if (k === "\x1b") await settle(60);
    }
    await tick();
  };
  return { ui, frame, keys, status: () => frame().at(-1)! };
}

describe("the finding where the eye is", () => {
  test("the leaking replay's row on the Overview: `!`, the title on the status line when selected, the count in the header", async () => {
    const growth = findings(leak.model).find((f) => f.id === "growth")!;
    expect(growth.severity).toBe("warning");
    for (const [columns, rows] of [
      [80, 24],
      [200, 60],
    ] as const) {
      const ctl = new Controller(null, 1000);
      ctl.replay = leak;
      const { ui, frame, status } = mount(ctl, columns, rows);
      await tick();
      const f = frame();
      for (const l of f) expect([...l].length).toBeLessThanOrEqual(columns);
      const row = f.find((l) => l.startsWith(`${leak.pid} `))!;
      expect(row).toBeDefined();
      expect(row).toContain("! ");
      if (columns >= 120) expect(row).toContain("! [recorded] hf_gpt2.py --leak");
      expect(f[0]).toMatch(/1 finding$/);
      expect(status()).toStartWith(`! warning: ${growth.title}`.slice(0, columns - 2));
      ui.unmount();
    }
  });

  test("a rank that leaks marks its own row and its job's row; a process without a warning is not marked", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = hostDocument(TORCHRUN);
    const job = ctl.doc.jobs[0]!;
    const rank1 = job.ranks.find((r) => r.rank === 1)!;
    const row = ctl.doc.processes.find((p) => p.pid === rank1.pid)!;
    ctl.models.byPid.set(row.agent_pid!, { ...leak, pid: row.agent_pid! });
    const { ui, frame } = mount(ctl, 120, 40);
    await tick();
    const f = frame();
    expect(f.find((l) => /^job\s/.test(l))).toContain("! ");
    const marked = f.filter((l) => /^\s*\d+ .*! /.test(l));
    expect(marked).toHaveLength(1);
    expect(marked[0]).toMatch(new RegExp(`^ +${rank1.pid} `));
    expect(f[0]).toMatch(/1 finding$/);
    ui.unmount();
  });
});

describe("htop's function keys", () => {
  test("F1 opens Help and closes it; Help says what k does", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const { ui, frame, keys } = mount(ctl, 120, 40, "process");
    await keys(F[1]);
    expect(frame()[1]).toContain("gpumem-tui keys");
    const help = frame().join("\n");
    expect(help).toMatch(/k {2}F9 +stop the selected process/);
    expect(help).not.toMatch(/j k +move the selection/);
    expect(KEYS.find(([k]) => k.split(/\s+/).includes("k"))![1]).toMatch(/^stop the selected process/);
    await keys(F[1]);
    expect(frame()[0]).toContain("[2 Process]");
    ui.unmount();
  });

  test("F9 asks how to stop the process, on Help too (where k scrolls)", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = leak;
    const { ui, status, keys, frame } = mount(ctl, 120, 40);
    await keys(F[9]);
    expect(status()).toContain(`k: pid ${leak.pid} is a recording: there is no process to stop`);
    await keys("2", F[9]);
    expect(status()).toContain(`k: pid ${leak.pid} is a replay: there is no process to stop`);
    await keys("?", "j", "j", "k");
    expect(frame()[1]).toContain("gpumem-tui keys");
    await keys(F[9]);
    expect(status()).toContain("is a replay: there is no process to stop");
    ui.unmount();
  });

  test("F4 filters as / does; F6 sorts by the next column as s does, and says where nothing sorts", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = hostDocument(TORCHRUN);
    const { ui, status, keys, frame } = mount(ctl, 120, 40);
    await keys(F[4], ..."notebook");
    expect(status()).toContain("filter: notebook▏");
    await keys("\r");
    expect(frame().filter((l) => /^\s*\d+ /.test(l))).toHaveLength(1);
    await keys("\x1b"); // clears the kept filter
    const header = () => frame().find((l) => l.startsWith("PID"))!;
    expect(header()).toContain("GPU MEM▼");
    await keys(F[6]);
    expect(header()).not.toContain("GPU MEM▼");
    expect(header()).toMatch(/ALLOCATED▼/);
    await keys("5", F[6]);
    expect(status()).toContain("F6: this screen has no columns to sort by");
    ui.unmount();
  });

  test("F3 searches the Overview's rows: the selection goes to the first row holding the text, F3 to the next", async () => {
    const ctl = new Controller(null, 1000);
    ctl.doc = hostDocument(TORCHRUN);
    const ranks = ctl.doc.jobs[0]!.ranks.map((r) => r.pid);
    const notebook = ctl.doc.processes.find((p) => p.command?.includes("notebook_kernel"))!;
    const { ui, status, keys, frame } = mount(ctl, 120, 40);
    // F9 names the selected row's process (any other key then leaves it running).
    const selectedPid = async () => {
      await keys(F[9]);
      const pid = Number(/^stop (\d+) /.exec(status())?.[1]);
      await keys("n");
      return pid;
    };
    await keys(F[3], ..."notebook");
    expect(status()).toContain("search: notebook▏");
    await keys("\r");
    expect(status()).not.toContain("search:");
    expect(frame()[0]).toContain("[1 Overview]");
    expect(await selectedPid()).toBe(notebook.pid);
    // From the notebook's row, round to the job's first rank, then F3 to the next.
    await keys(F[3], ..."train.py");
    expect(await selectedPid()).toBe(ranks[0]!);
    await keys(F[3], ..."train.py", F[3], "\x1b");
    expect(await selectedPid()).toBe(ranks[1]!);
    await keys(F[3], ..."zzz");
    expect(status()).toContain("search: zzz▏ (no row holds it)");
    // Segments lists no rows as text (its filter is /): F3 says where it searches.
    await keys("\x1b", "4", F[3]);
    expect(status()).toContain("F3: search finds rows on the Overview, Tensors and Findings");
    ui.unmount();
  });
});

describe("F3 on Tensors", () => {
  test("the selection goes to the first row whose text holds what is typed: Enter then opens that row's group", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = leak;
    const { ui, keys, status, frame } = mount(ctl, 120, 40, "tensors");
    const table = () => frame().slice(frame().findIndex((l) => l.includes("SIZE▼")) + 1, -1);
    // The first row holding "optimizer_state" is a group of two alike blocks (the leak's recording has no names).
    const group = table().find((l) => / optimizer_state /.test(l))!;
    expect(group).toMatch(/^ *2 × /);
    await keys(F[3], ..."optimizer_state");
    expect(status()).toContain("search: optimizer_state▏");
    expect(status()).not.toContain("no row holds it");
    await keys("\r"); // ends the search where it is
    expect(status()).not.toContain("search:");
    await keys("\r"); // opens the selected row: the group's two blocks under it
    const at = table().findIndex((l) => / optimizer_state ▾ /.test(l));
    expect(at).toBe(table().findIndex((l) => / optimizer_state /.test(l)));
    expect(table().slice(at + 1, at + 3).every((l) => /^ +98\.16 MiB optimizer_state +\(/.test(l))).toBe(true);
    await keys(F[3], ..."zzz-no-such-tensor");
    expect(status()).toContain("(no row holds it)");
    await keys("\x1b");
    ui.unmount();
  });
});

describe("Esc, + and -", () => {
  test("Esc from Findings opened on Process goes back to Process, then to the Overview", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = leak;
    const { ui, keys, frame } = mount(ctl, 120, 40);
    await keys("\r");
    expect(frame()[0]).toContain("[2 Process]");
    await keys("\r");
    expect(frame()[0]).toContain("[6 Findings]");
    await keys("\x1b");
    expect(frame()[0]).toContain("[2 Process]");
    await keys("\x1b");
    expect(frame()[0]).toContain("[1 Overview]");
    ui.unmount();
  });

  test("Esc after a kept filter clears it and stays; Esc again leaves the screen", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const { ui, keys, frame, status } = mount(ctl, 120, 40, "tensors");
    await keys("/", ..."param", "\r");
    expect(frame().join("\n")).toContain("param");
    await keys("\x1b");
    expect(frame()[0]).toContain("[3 Tensors]");
    expect(status()).toContain("filter cleared");
    await keys("\x1b");
    expect(frame()[0]).toContain("[1 Overview]");
    ui.unmount();
  });

  test("+ and - step along 250, 500, 1000, 2000, 5000 ms, each reached again from either side", async () => {
    const ctl = new Controller(null, 10_000);
    ctl.replay = await replayed("normal");
    const { ui, keys, status } = mount(ctl, 80, 24, "process");
    const seen: number[] = [];
    for (let i = 0; i < 6; i++) (await keys("-"), seen.push(ctl.intervalMs));
    expect(seen).toEqual([5000, 2000, 1000, 500, 250, 250]);
    expect(status()).toContain("interval 250 ms: the shortest - gives");
    for (let i = 0; i < 5; i++) (await keys("+"), seen.push(ctl.intervalMs));
    expect(seen.slice(6)).toEqual([500, 1000, 2000, 5000, 5000]);
    ui.unmount();
    // From an interval off the ladder (--interval 300), the next rung either way.
    for (const [key, want] of [
      ["+", 500],
      ["-", 250],
    ] as const) {
      const c = new Controller(null, 300);
      c.replay = ctl.replay;
      const m = mount(c, 80, 24, "process");
      await m.keys(key);
      expect(c.intervalMs).toBe(want);
      m.ui.unmount();
    }
  });
});

describe("the function-key bar", () => {
  test("at the bottom where the width allows, as htop's; narrower, the keys in words", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    for (const [columns, want] of [
      [80, /^F1Help +F3Search F4Filter F6SortBy F9Kill +F10Quit +every 1000 ms {2}\? help/],
      [60, /^F1Help +F3Search F4Filter F6SortBy F9Kill +F10Quit/],
      [50, /^every 1000 ms {2}\? help {2}Esc back {2}q quit/],
    ] as const) {
      const { ui, status, frame } = mount(ctl, columns, 24, "process");
      await tick();
      expect(status()).toMatch(want);
      for (const l of frame()) expect([...l].length).toBeLessThanOrEqual(columns);
      ui.unmount();
    }
  });
});
