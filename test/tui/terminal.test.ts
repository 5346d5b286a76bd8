// End to end in a real terminal: tmux runs the monitor on the demo recording (a transformers GPT-2
// training recorded on an H100, demo/), keys are sent, and the pane is read as a user would read it.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { DEMO_PID, makeDemo } from "../support/demo";
import { openRingRecording } from "../../src/collect/recording";
import { createModel, segmentInside } from "../../src/profiler";
import { replay } from "../../src/profiler/replay";
import { segmentsInOrder } from "../../src/tui/screens/segments";
import { cpuSeconds, reportCpu } from "../support/cpu";
import { paneEnv } from "../support/pane-env";

const tmux = Bun.which("tmux");
const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const BUN = process.execPath;
const q = (s: string) => `'${s.replaceAll("'", `'\\''`)}'`;
const WORK = mkdtempSync(join(tmpdir(), "term-"));

// A private server (-L) with no user config (-f /dev/null): nothing of the machine's tmux set-up,
// nor its default shell (a CI user's may be nologin), decides what the test sees.
const socket = `gpumem-e2e-${process.pid}`;
function run(...args: string[]) {
  const r = Bun.spawnSync([tmux!, "-L", socket, "-f", "/dev/null", ...args], { env: paneEnv(), stdout: "pipe", stderr: "pipe" }); // TMUX_TMPDIR: this run's folder
  return { ok: r.exitCode === 0, out: r.stdout.toString(), err: r.stderr.toString().trim() };
}
const sh = (...args: string[]) => run(...args).out;

// tmux needs a pseudo-terminal for its panes; a sandbox without /dev/pts has tmux but no way to run
// these tests. Probe once: a pane that prints a word. If it cannot, the tests skip and say why.
function probe(): string | null {
  if (!tmux) return "needs tmux: `apt install tmux`; .ci/run installs it";
  // The probe's session stays for the whole file: with it, killing a test's session never ends the
  // private server, so the next new-session cannot race a server on its way out. It ends with this
  // process (tail --pid), the server with it, where the file is cut short before its afterAll.
  const r = run("new-session", "-d", "-s", "probe", "-x", "40", "-y", "5", "/bin/sh", "-c", `echo tmux-pane-ok; exec tail --pid=${process.pid} -f /dev/null`);
  if (!r.ok) return `tmux cannot open a pane here: ${r.err || "exit status non-zero"}`;
  for (let i = 0; i < 50; i++) {
    if (sh("capture-pane", "-p", "-t", "probe").includes("tmux-pane-ok")) return null;
    Bun.sleepSync(100);
  }
  sh("kill-session", "-t", "probe");
  return "tmux started a pane but /bin/sh printed nothing in it within 5 s";
}
const cannot = probe();
// Each test its own terminals and monitors: concurrent (as many at once as the test command's
// --max-concurrency lets run).
const e2e = (name: string, fn: () => Promise<void>) =>
  cannot === null ? test.concurrent(name, fn, 30_000) : test.skip(`${name} (${cannot})`, fn);

/** How many children `pid` has (0 where it cannot be read). */
function children(pid: number): number {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).length;
  } catch {
    return 0;
  }
}

/** A terminal of its own for each monitor a test starts (the tests run concurrently: they share
 *  nothing but the tmux server): the line before the monitor, its pid, its exit status. */
let started = 0;
function start(cols: number, rows: number, args = "--demo", env = "", cwd = process.cwd()) {
  const n = ++started;
  const session = `gpumem-e2e-${process.pid}-${n}`;
  const pidfile = join(WORK, `monitor-${n}.pid`);
  // A line before the monitor, and the exit status after it: both must be on screen once it ends.
  // The bun running this test runs the monitor, whatever PATH the tmux server has; /bin/sh runs
  // the line, given as argv so tmux starts it directly instead of through a login shell.
  // The monitor writes its pid (a shell that execs it) so that a test signals that process and no other.
  const script = `cd ${q(cwd)} && echo before-the-monitor; ${env} NO_COLOR=1 /bin/sh -c 'echo $$ > "$0"; exec "$@"' ${q(pidfile)} ${q(BUN)} ${q(CLI)} ${args}; echo "exit status $?"; sleep 60`;
  const r = run("new-session", "-d", "-s", session, "-x", String(cols), "-y", String(rows), "/bin/sh", "-c", script);
  const lastStart = r.ok ? "started" : `failed: ${r.err}`;
  const pane = () => sh("capture-pane", "-p", "-t", session);
  return {
    session,
    pane,
    keys: (...keys: string[]) => sh("send-keys", "-t", session, ...keys),
    async until(what: string | RegExp, timeoutMs = 10_000): Promise<string> {
      const t0 = Date.now();
      for (;;) {
        const text = pane();
        if (typeof what === "string" ? text.includes(what) : what.test(text)) return text;
        if (Date.now() - t0 > timeoutMs) throw new Error(`never saw ${what} in:\n${text}\n(tmux new-session: ${lastStart})`);
        await Bun.sleep(100);
      }
    },
    /** The pid of the monitor, once it has written it. */
    pid(): number {
      const pid = Number(readFileSync(pidfile, "utf8").trim());
      if (!Number.isInteger(pid) || pid <= 1) throw new Error(`no monitor pid in ${pidfile}`);
      return pid;
    },
  };
}

afterAll(() => {
  // The panes' CPU, counted nowhere else (the server is not this process's child): test/support/cpu.ts.
  // The tests' panes (each left showing its exit status) closed first and reaped by the server
  // (until only the probe's shell is its child, at most 2 s), so that their monitors are counted.
  if (cannot === null) {
    const server = Number(sh("display-message", "-p", "#{pid}").trim());
    for (let n = 1; n <= started; n++) sh("kill-session", "-t", `gpumem-e2e-${process.pid}-${n}`);
    for (let i = 0; i < 100 && children(server) > 1; i++) Bun.sleepSync(20);
    reportCpu(`${relative(process.cwd(), Bun.main)} (tmux)`, cpuSeconds(server), 0);
  }
  if (cannot === null) sh("kill-server");
  rmSync(WORK, { recursive: true, force: true });
});

/** Where the Segments screen lists the segment holding transformer.wpe.weight after hf-gpt2.ring. */
async function wpeSegment(): Promise<number> {
  const rec = openRingRecording(join(import.meta.dir, "..", "fixtures", "hf-gpt2.ring"));
  const model = createModel().keepTrace();
  for await (const _ of replay(rec.source, { ranges: rec.ranges, names: rec.names, model })) {
    // to the end
  }
  rec.close();
  const pm = { pid: 0, model, source: "replay" as const, socket: null, title: "", ended: true };
  return segmentsInOrder(pm).findIndex((s) => segmentInside(model, { address: s.address })!.parts.some((x) => x.kind === "block" && x.block.name === "transformer.wpe.weight"));
}

describe("the monitor in a real terminal", () => {
  e2e("screens switch, the tensor table sorts, ? opens Help and closes it, Esc goes back, F10 quits and gives the terminal back", async () => {
    const t = start(120, 40);
    await t.until("demo: a training run recorded on");
    expect(t.pane()).not.toContain("before-the-monitor"); // the alternate screen
    t.keys("3");
    await t.until("[3 Tensors]");
    await t.until("Live memory by category");
    t.keys("s");
    await t.until("CATEGORY▼");
    t.keys("4");
    await t.until(/\d+ segments/);
    t.keys("?");
    await t.until("gpumem-tui keys");
    t.keys("?");
    await t.until("[4 Segments]");
    t.keys("2");
    await t.until("[2 Process]");
    t.keys("Escape");
    await t.until("[1 Overview]");
    t.keys("F10");
    const after = await t.until("exit status 0");
    expect(after).toContain("before-the-monitor");
    expect(after).not.toContain("gpumem-tui keys");
  });

  e2e("the demo moves on its own: steps advance on the Process screen with no key pressed", async () => {
    const t = start(120, 40);
    await t.until("demo: a training run recorded on");
    t.keys("2");
    // The first steps come within a second of the start (the recording begins as the first step
    // does), then about 12 a second: ten steps on within a few seconds.
    await t.until(/step [1-9]\d*/, 6_000);
    await t.until(/step [1-6]\d /, 6_000);
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("at 80×24 every line fits and the frame stays below the terminal's height (with CI=true set, as in a CI job's shell)", async () => {
    const t = start(80, 24, "--demo", "CI=true");
    await t.until("demo: a training run");
    t.keys("2");
    await t.until(/step [1-9]\d*/); // the demo has data for every screen
    // Every screen: each line fits, nothing wraps, and the frame is not taller than the terminal
    // (the tab line stays the first line and the status line the last one that is written).
    const screens: [string, string | RegExp][] = [["1", "PID"], ["2", "SHARE OF PEAK"], ["3", "Live memory by category"], ["4", /\d+ segments/], ["5", /carries a line|heaviest first/], ["6", /nothing wrong found|finding/], ["7", "gpumem-tui keys"]];
    for (const [key, content] of screens) {
      t.keys(key);
      await t.until(`[${key} `);
      const text = await t.until(content);
      const lines = text.split("\n");
      for (const l of lines) expect({ key, line: l, fits: [...l].length <= 80 }).toEqual({ key, line: l, fits: true });
      expect(lines[0]).toStartWith("gpumem-tui ");
      expect(lines[0]).toContain(`[${key} `);
      // The status line, one line (a message, or the key hint once it has gone), is the last thing written.
      expect(lines.filter((l) => l.trim()).at(-1)).toMatch(/demo: a training run|\? help/);
    }
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("SIGTERM and Ctrl-C also give the terminal back", async () => {
    const t = start(100, 30);
    await t.until("demo: a training run");
    t.keys("C-c");
    expect(await t.until("exit status 0")).toContain("before-the-monitor");
    const u = start(100, 30);
    await u.until("demo: a training run");
    process.kill(u.pid(), "SIGTERM"); // the monitor, not the shell around it
    expect(await u.until(/exit status \d+/)).toContain("before-the-monitor");
  });

  e2e("d writes a snapshot of the demo process into the current directory, its whole path on the status line at 80 columns; view opens it; e says why not", async () => {
    // Short (the path, named by the local time, must fit on a line of 80): this run's WORK itself.
    const dir = WORK;
    const t = start(80, 24, "--demo", "", dir);
    await t.until("demo: a training run recorded on");
    t.keys("2");
    await t.until(/step [1-9]\d*/);
    t.keys("d");
    const text = await t.until(".pickle");
    const lines = text.split("\n").map((l) => l.trimEnd());
    // One status line: the whole path, after the sentence where room is left for it (the screen
    // above keeps its rows).
    const status = lines.find((l) => l.endsWith(".pickle"))!;
    const path = status.slice(status.indexOf(`${dir}/`));
    expect(status === path || /^snapshot of pid \d+/.test(status)).toBe(true);
    expect(path).toMatch(new RegExp(`^${dir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}/\\d+-snapshot-\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\d(-\\d+)?\\.pickle$`));
    const v = Bun.spawnSync([BUN, CLI, "view", path, "--json"], { stdout: "pipe", stderr: "pipe" });
    expect(v.stderr.toString()).toBe("");
    const summary = JSON.parse(v.stdout.toString());
    expect(summary.devices[0].reserved_bytes).toBeGreaterThan(0);
    expect(summary.trace.entries).toBeGreaterThan(0);
    t.keys("e");
    await t.until("empty_cache: pid");
    expect(t.pane()).toContain("is a replay: there is no process to ask");
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("a GPT-2 training recorded on an H200, replayed: Tensors names parameters and AdamW state with shapes, Process shows ranges and no partial", async () => {
    const t = start(160, 50, `replay ${q(join(import.meta.dir, "..", "fixtures", "hf-gpt2.ring"))} --speed 20`);
    await t.until("[2 Process]");
    // the replay ends at step 38, the saved names applied where they were taken
    await t.until(/step 38 /, 20_000);
    const process = t.pane();
    expect(process).toContain("range train_step");
    expect(process).toMatch(/Optimizer\.step#AdamW\.step/);
    expect(process).not.toMatch(/partial|range#\d/);
    t.keys("3");
    const tensors = await t.until("[3 Tensors]");
    expect(tensors).toMatch(/exp_avg of transformer\.wte\.weight\s+50257×512\s+float32/);
    expect(tensors).toMatch(/transformer\.wte\.weight\s+50257×512\s+float32/);
    expect(tensors).not.toMatch(/\b0x[0-9a-f]{8,}\b/);
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("keys sent in one burst each count; p pauses the demo (its step stands still, the mark stays) and resumes it", async () => {
    const t = start(120, 40);
    await t.until("demo: a training run recorded on");
    t.keys("4", "3");
    await t.until("[3 Tensors]");
    t.keys("2");
    await t.until(/step [1-9]\d*/, 10_000);
    t.keys("p");
    await t.until("PAUSED paused: nothing is read");
    const step = () => /step (\d+)/.exec(t.pane())![1];
    await Bun.sleep(300);
    const at = step();
    await Bun.sleep(2500);
    expect(step()).toBe(at);
    t.keys("+");
    await t.until("PAUSED interval 2000 ms");
    t.keys("p");
    await t.until("resumed");
    expect(t.pane()).not.toContain("PAUSED");
    for (let i = 0; i < 150 && step() === at; i++) await Bun.sleep(100);
    // The replay moves on: a later step, or, where the pause fell near the run's end (its last step
    // is 69; the steps come at about 12 a second), the demo starting the run over.
    const now = Number(step());
    expect(now).not.toBe(Number(at));
    if (now < Number(at)) expect(Number(at)).toBeGreaterThanOrEqual(60);
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("the demo with its NVML track: the Overview shows the recorded GPU and the process row at 80×24 and 160×40; Enter opens the process", async () => {
    for (const [cols, rows] of [[80, 24], [160, 40]] as const) {
      const ring = makeDemo();
      const t = start(cols, rows, "--demo", `GPUMEM_TUI_DEMO=${q(ring)}`);
      await t.until("demo: a training run recorded on an H100, replayed at 1×");
      const text = await t.until(/^2915 .*\[rec(orded)?\]/m); // "[rec]" where COMMAND is narrow
      // GPU 0 where this machine has none; on a GPU machine the recorded one comes after its own.
      // "[rec]" where the header's line is narrow (80 columns), so that the name and memory stay.
      expect(text).toMatch(cols >= 120 ? /GPU \d+ \[recorded\] NVIDIA H100/ : /GPU \d+ \[rec\] NVIDIA H100/);
      expect(text).not.toContain("No GPU here");
      const lines = text.split("\n");
      for (const l of lines) expect({ l, fits: [...l].length <= cols }).toEqual({ l, fits: true });
      // At 80 columns PHASE, SM% and (one GPU) GPU give COMMAND the script and its first arguments.
      expect(lines.find((l) => l.startsWith("PID "))).toMatch(cols >= 120 ? /SM% +GPU MEM▼ +ALLOCATED +RESERVED +CPU%/ : /^PID +GPU MEM▼ +ALLOCATED +RESERVED +STEP COMMAND/);
      // The script whole and its first argument, each whole; " …" for the rest ("--seconds 40 …"
      // needs 31 columns, COMMAND has 30 at 80 columns: the value goes with the rest, never "40…").
      if (cols < 120) expect(text).toMatch(/^2915 .*\[rec\] hf_gpt2\.py --seconds( \d+)? …$/m);
      t.keys("Enter");
      await t.until(`pid ${DEMO_PID} [`);
      t.keys("q");
      await t.until("exit status 0");
      rmSync(dirname(ring), { recursive: true, force: true });
    }
  });

  e2e("a replay: the Process charts have axes and a legend; Enter on a segment lists its blocks with shapes and dtypes, Esc goes back", async () => {
    const t = start(120, 40, `replay ${q(join(import.meta.dir, "..", "fixtures", "hf-gpt2.ring"))} --speed 20`);
    const process = await t.until(/step 38 /, 20_000);
    expect(process).toMatch(/^ +\d+(\.\d+)? GiB ┤/m);
    expect(process).toMatch(/^ +0 ┤/m);
    expect(process).toContain("F forward  B backward  O optimizer  o outside them");
    // Round ticks in one unit, that of their spacing (f0cb369: -800 ms … -100 ms over 0.9 s), then the end.
    expect(process).toMatch(/^ {11} *-\d+ ms( +-\d+ ms)+ +end$/m);
    t.keys("4");
    await t.until("Enter: the selected segment's blocks");
    // The segment holding the first layers' parameters, where the model of the same replay lists it.
    const at = await wpeSegment();
    t.keys(..."j".repeat(at).split(""), "Enter");
    const seg = await t.until(/^segment 0x[0-9a-f]+: /m);
    expect(seg).toMatch(/transformer\.wpe\.weight +256×512 +float32/);
    expect(seg).toMatch(/^ +OFFSET +SIZE +NAME +SHAPE +DTYPE +AGE +CATEGORY/m);
    t.keys("Escape");
    await t.until(/^\d+ segments: /m);
    t.keys("q");
    await t.until("exit status 0");
  });

  e2e("the mouse: reporting on while the monitor runs and off after it; a click on a tab switches to it", async () => {
    const t = start(120, 40);
    await t.until("demo: a training run recorded on");
    expect(sh("display-message", "-p", "-t", t.session, "#{mouse_sgr_flag}#{mouse_standard_flag}").trim()).toBe("11");
    const x = t.pane().split("\n")[0]!.indexOf("4 Segments") + 1;
    t.keys("-l", `\x1b[<0;${x};1M\x1b[<0;${x};1m`);
    await t.until("[4 Segments]");
    t.keys("q");
    await t.until("exit status 0");
    expect(sh("display-message", "-p", "-t", t.session, "#{mouse_sgr_flag}#{mouse_standard_flag}").trim()).toBe("00");
  });

  e2e("the terminal is resized live", async () => {
    const t = start(120, 40);
    await t.until("120x40");
    sh("resize-window", "-t", t.session, "-x", "90", "-y", "30");
    await t.until("90x30");
    t.keys("q");
    await t.until("exit status 0");
  });
});
