// `run` keeps its word (README, "run"): one Ctrl-C reaches the program once, in a real terminal,
// with the monitor's screen or with `--json`; a signal sent to gpumem-tui is passed on once; a death
// by signal N is status 128+N; an output that fails (a full disk) keeps the program running and
// returns its status; the files run writes are its own (never planted, never through a link, 0600);
// temporary files go on SIGTERM. The program is test/support/signal_counter.c, which counts the
// signals it receives.
import { afterAll, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, existsSync, lstatSync, mkdtempSync, readdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join } from "node:path";
import { buildTool } from "../support/native";
import { cannot, q, terminal } from "../support/tmux";

const ROOT = join(import.meta.dir, "..", "..");
const CLI = join(ROOT, "src", "cli.ts");
const BUN = process.execPath;
const GPUMEM = `${q(BUN)} ${q(CLI)}`;
const root = process.getuid?.() === 0;
const counter = buildTool("signal_counter");
const base = mkdtempSync(join(tmpdir(), "gpumem-run-"));
chmodSync(base, 0o755); // the other user of the run log's test reaches its shared directory
let n = 0;
const fresh = () => mkdtempSync(join(base, `${n++}-`));

// Tests that start processes share nothing but the tmux server (each its own folder and named
// terminal): concurrent.
const inTerminal = (name: string, fn: () => Promise<void>) => (cannot === null ? test.concurrent(name, fn, 40_000) : test.skip(`${name} (${cannot})`, fn));

async function fileSays(path: string, what: RegExp, timeoutMs = 15_000): Promise<string> {
  const t0 = Date.now();
  for (;;) {
    const text = existsSync(path) ? readFileSync(path, "utf8") : "";
    if (what.test(text)) return text;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${path} never said ${what}: ${JSON.stringify(text)}`);
    await Bun.sleep(50);
  }
}

/** `run --json` without a terminal: status, stderr, and the output's lines. */
function runJson(out: string, argv: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync([BUN, CLI, "run", "--json", "--interval", "100", "--output", out, "--", ...argv], { env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, err: p.stderr.toString() };
}

describe("one Ctrl-C reaches the program once", () => {
  inTerminal("run --json: the program keeps the terminal; Ctrl-C reaches it once, and run exits with its status", async () => {
    const d = fresh();
    const count = join(d, "count");
    const t = terminal("json-c", `${GPUMEM} run --json --interval 200 --output ${q(join(d, "run.ndjson"))} -- ${q(counter)} ${q(count)}`);
    try {
      await fileSays(count, /^ready/);
      t.keys("C-c");
      expect(await fileSays(count, /^INT/)).toBe("INT 1 TERM 0\n");
      await t.until("exit status 0");
    } finally {
      t.close();
    }
  });

  inTerminal("run -- CMD: Ctrl-C on the monitor's screen is a key that closes it (the program runs on); the next Ctrl-C reaches the program once", async () => {
    const d = fresh();
    const count = join(d, "count");
    const t = terminal("tui-c", `TMPDIR=${q(d)} ${GPUMEM} run -- ${q(counter)} ${q(count)}`);
    try {
      await fileSays(count, /^ready/);
      await t.until(/pid \d+: /);
      t.keys("C-c");
      await t.until("waiting for pid");
      await Bun.sleep(300);
      expect(readFileSync(count, "utf8")).toMatch(/^ready/);
      t.keys("C-c");
      expect(await fileSays(count, /^INT/)).toBe("INT 1 TERM 0\n");
      await t.until("exit status 0");
    } finally {
      t.close();
    }
  });

  inTerminal("run -- CMD through a shell script: after the monitor closes, Ctrl-C reaches the program the script waits for, once", async () => {
    const d = fresh();
    const count = join(d, "count");
    const script = `${q(counter)} ${q(count)}; exit 0`;
    const t = terminal("tui-sh", `TMPDIR=${q(d)} ${GPUMEM} run -- /bin/sh -c ${q(script)}`);
    try {
      await fileSays(count, /^ready/);
      await t.until(/pid \d+: /);
      t.keys("q");
      await t.until("waiting for pid");
      t.keys("C-c");
      expect(await fileSays(count, /^INT/)).toBe("INT 1 TERM 0\n");
      await t.until(/exit status \d+/);
    } finally {
      t.close();
    }
  });

  inTerminal("run -- CMD: SIGINT sent to gpumem-tui by kill while the screen is up is passed on, once", async () => {
    const d = fresh();
    const count = join(d, "count");
    const t = terminal("tui-kill", `TMPDIR=${q(d)} ${GPUMEM} run -- ${q(counter)} ${q(count)}`);
    try {
      const gpumem = Number(/^ready (\d+)/.exec(await fileSays(count, /^ready/))![1]);
      await t.until(/pid \d+: /);
      process.kill(gpumem, "SIGINT");
      expect(await fileSays(count, /^INT/)).toBe("INT 1 TERM 0\n");
      await t.until("exited with status 0");
      t.keys("q");
      await t.until("exit status 0");
    } finally {
      t.close();
    }
  });

  for (const sig of ["SIGINT", "SIGTERM"] as const) {
    test.concurrent(`run --json, no terminal: ${sig} sent to gpumem-tui is passed on, once`, async () => {
      const d = fresh();
      const count = join(d, "count");
      // setsid: no controlling terminal, as under a scheduler or nohup
      const p = Bun.spawn(["setsid", BUN, CLI, "run", "--json", "--interval", "100", "--output", join(d, "run.ndjson"), "--", counter, count], { stdout: "pipe", stderr: "pipe" });
      const gpumem = Number(/^ready (\d+)/.exec(await fileSays(count, /^ready/))![1]);
      process.kill(gpumem, sig);
      expect(await fileSays(count, /^INT/)).toBe(sig === "SIGINT" ? "INT 1 TERM 0\n" : "INT 0 TERM 1\n");
      expect(await p.exited).toBe(0);
    }, 20_000);
  }
});

describe("a death by signal N is status 128+N", () => {
  for (const sig of ["SIGBUS", "SIGFPE", "SIGUSR1", "SIGXCPU", "SIGSEGV"] as const) {
    test(sig, () => {
      const out = join(fresh(), "run.ndjson");
      const { code } = runJson(out, ["/bin/sh", "-c", `ulimit -c 0; kill -s ${sig.slice(3)} $$`]);
      const want = 128 + (constants.signals as Record<string, number>)[sig]!;
      expect(code).toBe(want);
      const last = JSON.parse(readFileSync(out, "utf8").trim().split("\n").at(-1)!);
      expect(last.program.exit_status).toBe(want);
    });
  }
});

// A full disk: a 1 MiB tmpfs, mounted where the tests run as root, filled up.
const full = root ? fresh() : null;
const mounted = full !== null && Bun.spawnSync(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", full]).exitCode === 0;
if (mounted) Bun.spawnSync(["/bin/sh", "-c", `dd if=/dev/zero of=${q(join(full!, "fill"))} bs=4k 2>/dev/null; true`]);
afterAll(() => {
  if (mounted) Bun.spawnSync(["umount", full!]);
});

describe("--output on a full disk", () => {
  const why = !root ? "needs root to mount a small tmpfs" : !mounted ? "mount -t tmpfs failed here" : null;
  (why === null ? test : test.skip)(`the error is said once, the program runs to its end, and run returns its status${why ? ` (${why})` : ""}`, () => {
    const d = fresh();
    const marker = join(d, "ran");
    const out = join(full!, "run.ndjson");
    const { code, err } = runJson(out, ["/bin/sh", "-c", `sleep 0.6; echo to-the-end > ${q(marker)}; exit 7`]);
    expect(code).toBe(7);
    expect(readFileSync(marker, "utf8")).toBe("to-the-end\n");
    const lines = err.trim().split("\n");
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^gpumem-tui: cannot write the samples to .*run\.ndjson: no space left on the device; removed it; pid \d+ runs on/);
    expect(existsSync(out)).toBe(false);
  });
});

describe("--output: the user's own file, 0600, never through a link, never another user's", () => {
  test("a new file and a replaced own file are 0600 (they hold command lines)", () => {
    const d = fresh();
    const fresh1 = join(d, "new.ndjson");
    expect(runJson(fresh1, ["true"]).code).toBe(0);
    expect(statSync(fresh1).mode & 0o777).toBe(0o600);
    const own = join(d, "own.ndjson");
    writeFileSync(own, "old\n", { mode: 0o644 });
    chmodSync(own, 0o644);
    expect(runJson(own, ["true"]).code).toBe(0);
    expect(statSync(own).mode & 0o777).toBe(0o600);
    expect(readFileSync(own, "utf8")).not.toContain("old");
  });

  test("a symbolic link is refused in one line before the program starts; its target is untouched", () => {
    const d = fresh();
    const target = join(d, "victim");
    writeFileSync(target, "the victim's own words\n");
    const link = join(d, "run.ndjson");
    Bun.spawnSync(["ln", "-s", target, link]);
    const marker = join(d, "started");
    const { code, err } = runJson(link, ["touch", marker]);
    expect(code).toBe(1);
    expect(err).toBe(`gpumem-tui: cannot write the samples to ${link}: it is a symbolic link (never followed); the program was not started\n`);
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(target, "utf8")).toBe("the victim's own words\n");
  });

  (root ? test : test.skip)(`another user's file is refused; it is left as it was${root ? "" : " (needs root to play another user)"}`, () => {
    const d = fresh();
    const theirs = join(d, "run.ndjson");
    writeFileSync(theirs, "");
    chmodSync(theirs, 0o666);
    chownSync(theirs, 65534, 65534);
    const marker = join(d, "started");
    const { code, err } = runJson(theirs, ["touch", marker]);
    expect(code).toBe(1);
    expect(err).toContain("belongs to another user (uid 65534)");
    expect(existsSync(marker)).toBe(false);
    expect(readFileSync(theirs, "utf8")).toBe("");
  });
});

describe("the run log (run -- CMD): a new private file, never one planted at its old, guessable name", () => {
  // `exec` keeps the shell's pid for gpumem-tui: the planted name is the one the log once had.
  async function plantedRun(name: string, plant: string) {
    const d = fresh();
    chmodSync(d, 0o1777); // a shared temporary directory, as /tmp is
    const victim = join(d, "victim");
    writeFileSync(victim, "the victim's own words\n");
    const inner = `export TMPDIR=${q(d)}; ${plant}; exec ${GPUMEM} run -- /bin/sh -c 'echo secret-output'`;
    const t = terminal(name, `/bin/sh -c ${q(inner)}`);
    try {
      await t.until("exited with status 0");
      t.keys("q");
      await t.until("exit status 0");
    } finally {
      t.close();
    }
    return { d, victim };
  }

  /** The program's output is in a new log of an unguessable name, ours and 0600. */
  function expectOwnLog(d: string) {
    const logs = readdirSync(d).filter((f) => /^gpumem-tui-run-\d+-[0-9a-f]{12}\.log$/.test(f));
    expect(logs).toHaveLength(1);
    const log = join(d, logs[0]!);
    expect(readFileSync(log, "utf8")).toBe("secret-output\n");
    expect(lstatSync(log).isFile()).toBe(true);
    expect(statSync(log).mode & 0o777).toBe(0o600);
    expect(statSync(log).uid).toBe(process.getuid!());
  }

  inTerminal("a symbolic link planted there is not followed: its target is untouched", async () => {
    const { d, victim } = await plantedRun("log-link", `ln -s "$TMPDIR/victim" "$TMPDIR/gpumem-tui-run-$$.log"`);
    expect(readFileSync(victim, "utf8")).toBe("the victim's own words\n");
    expectOwnLog(d);
  });

  (root && cannot === null ? test.concurrent : test.skip)(`a file another user created there is not written: they read nothing${root ? "" : " (needs root to play another user)"}`, async () => {
    const { d } = await plantedRun("log-other", `setpriv --reuid=65534 --regid=65534 --clear-groups /bin/sh -c 'umask 0; : > "$0"' "$TMPDIR/gpumem-tui-run-$$.log"`);
    const planted = readdirSync(d).filter((f) => /^gpumem-tui-run-\d+\.log$/.test(f));
    expect(planted).toHaveLength(1);
    expect(statSync(join(d, planted[0]!)).uid).toBe(65534);
    expect(readFileSync(join(d, planted[0]!), "utf8")).toBe("");
    expectOwnLog(d);
  }, 40_000);
});

describe("other files the monitor writes", () => {
  test("replay --snapshot: a link planted at the temporary name is not followed", () => {
    const d = fresh();
    const victim = join(d, "victim");
    writeFileSync(victim, "the victim's own words\n");
    const out = join(d, "out.pickle");
    const ring = join(ROOT, "test", "fixtures", "normal-history.ring");
    const p = Bun.spawnSync(["/bin/sh", "-c", `ln -s ${q(victim)} ${q(out)}.$$.tmp; exec ${GPUMEM} replay ${q(ring)} --snapshot ${q(out)}`], { stdout: "pipe", stderr: "pipe" });
    expect(p.stderr.toString()).toBe("");
    expect(p.exitCode).toBe(0);
    expect(readFileSync(victim, "utf8")).toBe("the victim's own words\n");
    expect(lstatSync(out).isFile()).toBe(true);
    expect(statSync(out).mode & 0o777).toBe(0o600);
  });

  for (const sig of ["SIGTERM", "SIGINT"] as const) {
    test.concurrent(`${sig} to replay x.ring.gz --json leaves no temporary file`, async () => {
      const d = fresh();
      // The demo's recording: at its own pace it plays for minutes, so the signal lands while it
      // runs (a recording of a second could end first on a loaded machine: exit 0, no signal).
      const ring = join(ROOT, "demo", "demo.ring.gz");
      const p = Bun.spawn([BUN, CLI, "replay", ring, "--json", "--speed", "1"], { env: { ...process.env, TMPDIR: d }, stdout: "pipe", stderr: "pipe" });
      await p.stdout.getReader().read(); // replaying
      p.kill(sig);
      await p.exited;
      expect(p.signalCode ?? p.exitCode).toBe(sig);
      expect(readdirSync(d)).toEqual([]);
    }, 20_000);
  }
});
