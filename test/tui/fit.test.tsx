// Issue 27's 80×24-first screens, at 80×24, 120×40 and 200×60, on the demo (its recording and NVML
// track, test/support/demo.ts), on the committed recordings (test/fixtures/*.ring) and on a host
// running a 4-rank job (test/support/jobs.ts): nothing cut inside a character, Help whole and
// scrollable, every rank shown, charts tall enough with axes and a time scale, messages that give
// the key hint back, Esc / ? / F10, sorts by every column shown, alike tensors grouped.
import { describe, expect, test } from "bun:test";
import { render } from "ink-testing-library";
import { rmSync } from "node:fs";
import { dirname } from "node:path";
import { steppedClock, until } from "../support/clock";
import { makeDemo } from "../support/demo";
import { hostDocument, type RankSpec } from "../support/jobs";
import { replayed } from "../support/replayed";
import { App, MESSAGE_MS } from "../../src/tui/app";
import { Controller } from "../../src/tui/controller";
import { demoStarter } from "../../src/tui/main";
import { SCREENS } from "../../src/tui/registry";
import { parseKeys } from "../../src/tui/keys";
import { cut, pad } from "../../src/tui/format";
import { blocks } from "../../src/profiler";
import { counted } from "../../src/words";
import { settle } from "../support/settle";

const SIZES = [[80, 24], [120, 40], [200, 60]] as const;
const plain = (s: string) => s.replace(/\x1b\[[0-9;]*m/g, "");
const tick = () => settle();
/** What a terminal shows of a line: its UTF-8 read back (a lone surrogate becomes U+FFFD). */
const onTerminal = (s: string) => new TextDecoder().decode(new TextEncoder().encode(s));

/** Every screen of `ctl` at `columns`×`rows`: the lines of each, by key. */
async function everyScreen(ctl: Controller, columns: number, rows: number) {
  const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
  const out: Record<string, string[]> = {};
  for (const s of SCREENS) {
    ui.stdin.write(s.key);
    await until(() => plain(ui.lastFrame()!).split("\n")[0]!.includes(`[${s.key} `) || plain(ui.lastFrame()!).split("\n")[0]!.includes(`[${s.key}]`));
    out[s.key] = plain(ui.lastFrame()!).split("\n");
  }
  ui.unmount();
  return out;
}

describe("cut text", () => {
  test("pad and cut stop between graphemes and within the display width: an emoji, CJK, a combining mark", () => {
    for (const s of ["train.py --tag 🚀🚀🚀🚀", "学习率学习率学习率", "cafe\u0301 cafe\u0301 cafe\u0301", "👩‍👩‍👧 family"]) {
      for (let w = 1; w < 24; w++) {
        const p = pad(s, w);
        expect(onTerminal(p)).toBe(p); // no half of a surrogate pair
        expect(Bun.stringWidth(p)).toBe(w);
        expect(s.startsWith(cut(s, w))).toBe(true);
      }
    }
  });

  for (const [columns, rows] of SIZES) {
    test(`${columns}×${rows}: a command with emoji and CJK, on every screen of a recording: no U+FFFD, no line wider than the terminal`, async () => {
      const ctl = new Controller(null, 1000);
      const specs: RankSpec[] = [{ fixture: "normal", rank: null, world_size: null, ppid: 1, device: 0, command: `python3 train.py --run ${"🚀学".repeat(60)}` }];
      ctl.doc = hostDocument(specs, 1);
      ctl.replay = await replayed("oom");
      for (const [key, lines] of Object.entries(await everyScreen(ctl, columns, rows))) {
        for (const l of lines) {
          expect({ key, l, bad: onTerminal(l).includes("\uFFFD") }).toEqual({ key, l, bad: false });
          expect({ key, l, width: Bun.stringWidth(l) <= columns }).toEqual({ key, l, width: true });
        }
      }
    });
  }
});

describe("the demo at every size", () => {
  for (const [columns, rows] of SIZES) {
    test(`${columns}×${rows}: an Overview chart with axes and a time scale; Process charts at least 4 rows with a phase strip that says what it is`, async () => {
      const ring = makeDemo();
      const ctl = new Controller(null, 250);
      const clock = steppedClock();
      const demo = demoStarter(ctl, { speed: 1, ring, clock });
      demo.start();
      try {
        for (let i = 0; i < 8; i++) (await clock.advance(250_000), await ctl.tick());
        const s = await everyScreen(ctl, columns, rows);
        const o = s["1"]!;
        expect(o.some((l) => /^ +100% ┤/.test(l))).toBe(true); // utilization's axis
        expect(o.some((l) => /GiB ┤/.test(l))).toBe(true); // memory's axis
        expect(o.some((l) => /^ +-[\d.]+ (s|min|h) .* now/.test(l))).toBe(true); // the time scale
        expect(o.some((l) => /^\d+ .*\[rec(orded)?\] hf_gp/.test(l))).toBe(true); // the script, not the interpreter
        const p = s["2"]!;
        // A chart's rows: the y axis in the gutter's last column, braille after it.
        const axisRows = p.filter((l) => (l[10] === "┤" || l[10] === "│") && /[⠀-⣿]/.test(l));
        expect(axisRows.length).toBeGreaterThanOrEqual(4);
        expect(p.some((l) => /^ +phase [oFBO━┈ ]+$/.test(l))).toBe(true);
        // The letters, or (steps shorter than a column) the share of each phase in the mixed columns.
        expect(p.some((l) => l.includes("phase: F forward  B backward  O optimizer") || /phase: ┈ phases mixed in a [\d.]+ ms column: F \d+%/.test(l))).toBe(true);
        // The step table: what each column is, then what it adds up (a phase's own bytes, against
        // PEAK: all memory in use), and every phase's row under them.
        const h = p.findIndex((l) => /^PHASE +ALLOCATED +TEMPORARY +HELD AT END +PEAK +SHARE OF PEAK$/.test(l));
        expect(h).toBeGreaterThan(0);
        expect(p[h + 1]).toMatch(/^step \d+ +sum in phase +of it, freed +of it, kept +most in use +of it at peak$/);
        for (const phase of ["outside", "forward", "backward", "optimizer"]) expect(p.slice(h + 2).some((l) => l.startsWith(`${phase} `))).toBe(true);
        for (const lines of Object.values(s)) for (const l of lines) expect(onTerminal(l).includes("\uFFFD")).toBe(false);
      } finally {
        demo.stop?.();
        rmSync(dirname(ring), { recursive: true, force: true });
      }
    });
  }

  test("the Overview's history goes on across the demo's loops (it never starts over)", async () => {
    const ring = makeDemo();
    const ctl = new Controller(null, 250);
    const clock = steppedClock();
    const demo = demoStarter(ctl, { speed: 1, ring, clock });
    demo.start();
    try {
      let longest = 0;
      let last = 0;
      // Past the recording's end (a second) several times over: the demo loops.
      for (let i = 0; i < 40; i++) {
        (await clock.advance(250_000), await ctl.tick());
        const h = [...ctl.state.history.values()][0];
        const n = h?.util.length ?? 0;
        expect(n).toBeGreaterThanOrEqual(last);
        last = n;
        longest = Math.max(longest, n);
        const t = h?.timesMs ?? [];
        for (let k = 1; k < t.length; k++) expect(t[k]!).toBeGreaterThan(t[k - 1]!);
      }
      expect(longest).toBeGreaterThan(10);
    } finally {
      demo.stop?.();
      rmSync(dirname(ring), { recursive: true, force: true });
    }
  });
});

describe("the 4-rank job at 80×24", () => {
  const launcher = "/opt/torch/.venv/bin/python3 -m torch.distributed.run --nproc-per-node 4 --rdzv-backend c10d --rdzv-endpoint localhost:29400 train.py --lr 3e-4 --batch 64 --epochs 3";
  const FOUR: RankSpec[] = [
    { fixture: "normal", rank: 0, world_size: 4, ppid: 4700, device: 0, command: launcher },
    { fixture: "no-zero-grad", rank: 1, world_size: 4, ppid: 4700, device: 1, command: launcher },
    { fixture: "kept-loss-graph", rank: 2, world_size: 4, ppid: 4700, device: 2, command: launcher },
    { fixture: "oom", rank: 3, world_size: 4, ppid: 4700, device: 3, command: launcher },
  ];
  for (const [columns, rows] of SIZES) {
    test(`${columns}×${rows}: every rank shows under the job's row; its notes never push one out`, async () => {
      const ctl = new Controller(null, 1000);
      // Six GPUs: four ranks and, on the last, a process of its own; the panels take twelve lines at 80×24.
      ctl.doc = hostDocument(FOUR, 6);
      const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} />);
      await tick();
      const f = plain(ui.lastFrame()!).split("\n");
      for (const pid of ctl.doc!.jobs[0]!.pids) expect(f.some((l) => l.startsWith(`  ${pid} `))).toBe(true);
      expect(ctl.doc!.jobs[0]!.pids.length).toBe(4);
      for (const l of f) expect(Bun.stringWidth(l)).toBeLessThanOrEqual(columns);
      ui.unmount();
    });
  }
});

describe("Help and the habits", () => {
  for (const [columns, rows] of SIZES) {
    test(`${columns}×${rows}: Help scrolls (j k, Page Down) to its last line, ? q and Esc always on it; ? and Esc go back`, async () => {
      const ctl = new Controller(null, 1000);
      ctl.replay = await replayed("normal");
      const ui = render(<App ctl={ctl} ascii={false} size={{ columns, rows }} initialScreen="tensors" />);
      const frame = () => plain(ui.lastFrame()!).split("\n");
      ui.stdin.write("?");
      await until(() => frame()[0]!.includes("[7 Help]") || frame()[0]!.includes("[7]"));
      const seen = new Set<string>();
      for (let i = 0; i < 40; i++) {
        const f = frame();
        f.forEach((l) => seen.add(l.trim()));
        expect(f.some((l) => /\? Esc close|\? close/.test(l) && l.includes("q quit"))).toBe(true);
        for (const l of f) expect(Bun.stringWidth(l)).toBeLessThanOrEqual(columns);
        ui.stdin.write(i % 3 === 2 ? "\x1b[6~" : "j");
        await tick();
      }
      // Every key the help names was on the screen at some point: its last line too.
      const all = [...seen].join("\n");
      for (const k of ["q  F10  Ctrl-C", "Esc", "Numbers come from NVML"]) expect(all).toContain(k);
      ui.stdin.write("k"); // scrolls back up here: no kill prompt
      await tick();
      expect(ctl.status).toBe("");
      ui.stdin.write("?");
      await until(() => frame()[0]!.includes("[3 Tensors]") || frame()[0]!.includes("[3]"));
      ui.stdin.write("2");
      await tick();
      ui.stdin.write("\x1b");
      await until(() => frame()[0]!.includes("[1 Overview]") || frame()[0]!.includes("[1]"));
      ui.unmount();
      // F10 as terminals send it is a key of its own (it quits: the tmux test in terminal.test.ts).
      expect(parseKeys("\x1b[21~")).toEqual([{ kind: "key", name: "f10" }]);
    });
  }

  test("a message gives the key hint back after MESSAGE_MS; a question waits for its answer", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 80, rows: 24 }} initialScreen="process" />);
    const last = () => plain(ui.lastFrame()!).split("\n").at(-1)!;
    ctl.say("demo: a training run recorded on an H100, replayed at 1× (1 Overview, 2 Process, 3 Tensors and 4 Segments)");
    await tick();
    expect(last()).toStartWith("demo: a training run");
    expect(plain(ui.lastFrame()!).split("\n").length).toBe(23); // one status line: the banner does not wrap
    ctl.statusAt -= MESSAGE_MS; // as if MESSAGE_MS had passed
    ctl.notify();
    await tick();
    expect(last()).toContain("? help");
    ui.unmount();
  });
});

describe("tables", () => {
  test("the Tensors screen: alike blocks are one row (N × size), Enter opens it, unnamed rows do not repeat their category; the filter counts in the totals", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 40 }} initialScreen="tensors" />);
    const frame = () => plain(ui.lastFrame()!).split("\n");
    await tick();
    // The count in its own column ("12 ×"), then SIZE whole.
    const group = frame().findIndex((l) => /^\s*\d+ ×\s+[\d.]+ (B|KiB|MiB|GiB) /.test(l));
    expect(group).toBeGreaterThan(0);
    const n = Number(frame()[group]!.trim().split(" ")[0]);
    expect(n).toBeGreaterThan(1);
    for (const l of frame()) {
      const m = /^\s*(?:\d+ ×\s+)?[\d.]+ (?:B|KiB|MiB|GiB) +(\S+) +(.*)$/.exec(l);
      if (m) expect(m[2]!.startsWith(`(${m[1]},`)).toBe(false);
    }
    // Select the group (rows before it: the header is the line before the first row) and open it.
    const header = frame().findIndex((l) => l.includes("SIZE▼"));
    for (let i = 0; i < group - header - 1; i++) ui.stdin.write("j");
    await tick();
    const before = frame().filter((l) => /^\s*[\d.]+ (B|KiB|MiB|GiB) /.test(l)).length;
    ui.stdin.write("\r");
    await tick();
    const after = frame().filter((l) => /^\s*[\d.]+ (B|KiB|MiB|GiB) /.test(l)).length;
    expect(after).toBeGreaterThanOrEqual(Math.min(before + n, 40 - 10));
    // The filter: the totals are those of the blocks it keeps.
    ui.stdin.write("/");
    for (const c of "backward") ui.stdin.write(c);
    ui.stdin.write("\r");
    await tick();
    const kept = blocks(ctl.replay!.model, { limit: Infinity }).blocks.filter((b) => b.phase === "backward");
    // Counted in the singular where it is one ("in 1 block", issue 39's words).
    expect(frame()[1]).toContain(`in ${counted(kept.length, "block")}`);
    ui.unmount();
  });

  test("the Process screen's range list has a header that says what it adds up", async () => {
    const ctl = new Controller(null, 1000);
    ctl.replay = await replayed("normal");
    const ui = render(<App ctl={ctl} ascii={false} size={{ columns: 120, rows: 60 }} initialScreen="process" />);
    await tick();
    expect(plain(ui.lastFrame()!)).toMatch(/RANGE \(record_function\) +ALLOCATED IN STEP/);
    ui.unmount();
  });
});
