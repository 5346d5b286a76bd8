// The attach helper (cuda/inject*.c) against names planted where a target's maps point, and the
// monitor's bound on the helper (src/attach/helper.ts runHelper), with real processes, FIFOs, links
// and a second uid (issue 35, build item 3). A name in /proc/PID/maps is another user's to plant
// at once the file there is gone (`python3 (deleted)` in a shared /tmp): the helper must never
// block on it (a FIFO), follow it (a link), read it in the monitor's root instead of the target's,
// or take a file that is not the one mapped; and a helper that stalls is killed, its target let go.
// The cases with another uid or a mount namespace need root (setpriv, unshare, mount): skipped, and
// said, otherwise.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { chmodSync, chownSync, copyFileSync, lstatSync, mkdtempSync, readFileSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { buildInject, HELPER_EXIT, runHelper } from "../../src/attach/helper";
import { asUid, expectRunsOn, running, startSleeper } from "./support";

const OTHER = 5000;
const root = process.getuid?.() === 0;
const asRoot = root ? test : test.skip;
if (!root) console.log("skipped: the cases with another uid or a mount namespace need root (setpriv, unshare, mount)");
const AS_OTHER = asUid(OTHER);
/** The statically linked python3 (its interpreter inside the executable), where there is one. */
const STATIC_PYTHON = "/usr/bin/python3.11";
/** The most a probe may take here, hostile names or not (issue 35: "attach ends within 5 s"). */
const PROBE_LIMIT_MS = 5000;

const helper = buildInject();
if (!helper.ok) throw new Error(helper.error);
const INJECT = helper.path;

const started: (() => Promise<void>)[] = [];
/** Directories made for one test, and for the whole file (the launcher). */
const made: string[] = [];
const lasting: string[] = [];
afterEach(async () => {
  for (const end of started.splice(0)) await end();
  for (const d of made.splice(0)) rmSync(d, { recursive: true, force: true });
});
afterAll(() => {
  for (const d of lasting) rmSync(d, { recursive: true, force: true });
});

/** A directory owned by `uid`, 0755 (the target's own, where the target's user deletes and plants). */
function dirOf(uid: number, list = made): string {
  const d = mkdtempSync(join(tmpdir(), "gpumem-hostile-"));
  list.push(d);
  chmodSync(d, 0o755);
  chownSync(d, uid, uid);
  return d;
}

/** A python started (startSleeper), ended after the test. */
async function sleeper(argv: string[], env: Record<string, string> = {}, code?: string): Promise<number> {
  const t = await startSleeper(argv, { env, code });
  started.push(t.end);
  return t.pid;
}

/** The helper's probe run straight, as this user or (setpriv) as OTHER, killed by the test past
 *  PROBE_LIMIT_MS so that a helper that blocks fails the test instead of hanging it. */
async function probe(pid: number, as: "self" | "other"): Promise<{ code: number | null; out: string; err: string; ms: number }> {
  const t0 = performance.now();
  const p = Bun.spawn([...(as === "other" ? AS_OTHER : []), INJECT, "probe", String(pid)], { stdout: "pipe", stderr: "pipe" });
  const timer = setTimeout(() => p.kill("SIGKILL"), PROBE_LIMIT_MS);
  const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  clearTimeout(timer);
  return { code: p.signalCode ? null : code, out: out.trim(), err: err.trim(), ms: performance.now() - t0 };
}

/** A copy of the static python3 at dir/python3 started as `uid`, then the copy deleted: the maps
 *  then name `dir/python3 (deleted)`, a name anyone who can write dir may take. */
async function deletedExecutable(uid: number): Promise<{ pid: number; dir: string; name: string }> {
  const dir = dirOf(uid);
  const exe = join(dir, "python3");
  copyFileSync(STATIC_PYTHON, exe);
  chmodSync(exe, 0o755);
  const pid = await sleeper(uid === 0 ? [exe] : [...AS_OTHER, exe]);
  unlinkSync(exe);
  const name = `${exe} (deleted)`;
  expect(readFileSync(`/proc/${pid}/maps`, "utf8")).toContain(name);
  return { pid, dir, name };
}

/** A python whose interpreter is a shared libpython, not the executable (which /proc/PID/exe would
 *  reach without a name): a launcher of ours (main calls Py_BytesMain) linked to a libpython that
 *  OTHER can run (the python3's own where it is shared, else the system's), found by
 *  LD_LIBRARY_PATH, so that a copy of the library can be loaded from a directory and deleted. */
function sharedPython(): { launcher: string; lib: string; home: string } | null {
  if (!root) return null;
  const q = Bun.spawnSync(["python3", "-c", "import sysconfig as s; print(s.get_config_var('LIBDIR') + '/' + s.get_config_var('INSTSONAME'))"]);
  const own = q.stdout.toString().trim();
  const system = Bun.spawnSync(["sh", "-c", "ls /usr/lib/*/libpython3*.so.1.0 /usr/lib/libpython3*.so.1.0 2>/dev/null"]).stdout.toString().split("\n");
  const dir = dirOf(0, lasting);
  writeFileSync(join(dir, "main.c"), "int Py_BytesMain(int, char **);\nint main(int argc, char **argv) { return Py_BytesMain(argc, argv); }\n");
  for (const [i, lib] of [own, ...system].filter((l) => l.endsWith(".so.1.0")).entries()) {
    const launcher = join(dir, `python-${i}`);
    if (Bun.spawnSync(["cc", "-o", launcher, join(dir, "main.c"), lib]).exitCode !== 0) continue;
    // Its home (the standard library): found from the library's own place, named for the copy's.
    const env = { ...process.env, LD_LIBRARY_PATH: dirname(lib) };
    const run = Bun.spawnSync([...AS_OTHER, launcher, "-c", "import sys; print(sys.base_prefix)"], { env });
    if (run.exitCode === 0) return { launcher, lib, home: run.stdout.toString().trim() };
  }
  return null;
}
const SHARED = sharedPython();
const withShared = root && SHARED ? test : test.skip;
if (root && !SHARED) console.log("skipped: the deleted-libpython cases need a python3 built with a shared libpython");

async function deletedLibpython(): Promise<{ pid: number; dir: string; name: string }> {
  const { launcher, lib, home } = SHARED!;
  const dir = dirOf(OTHER);
  const copy = join(dir, lib.slice(lib.lastIndexOf("/") + 1));
  copyFileSync(lib, copy);
  chmodSync(copy, 0o755);
  chownSync(copy, OTHER, OTHER);
  const pid = await sleeper([...AS_OTHER, launcher], { LD_LIBRARY_PATH: dir, PYTHONHOME: home });
  expect(readFileSync(`/proc/${pid}/maps`, "utf8")).toContain(copy);
  unlinkSync(copy);
  return { pid, dir, name: `${copy} (deleted)` };
}

function mkfifo(path: string, owner: number): void {
  const p = Bun.spawnSync(["mkfifo", path]);
  if (p.exitCode !== 0) throw new Error(`mkfifo ${path}: ${p.stderr}`);
  chownSync(path, owner, owner);
}

describe("the helper reads only the files mapped, never a name planted where they were", () => {
  asRoot("root: a FIFO named `python3 (deleted)` where the target's deleted executable was is never opened; the probe reads the mapped file itself", async () => {
    const t = await deletedExecutable(0);
    mkfifo(t.name, 0);
    const r = await probe(t.pid, "self");
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^python=3\.\d+\.\d+ object=.*python3 \(deleted\) /);
    expect(r.ms).toBeLessThan(PROBE_LIMIT_MS);
    expect(lstatSync(t.name).isFIFO()).toBe(true);
    expectRunsOn(t.pid);
  });

  asRoot("same uid, not root: the deleted executable is read through /proc/PID/exe, the FIFO at its name left alone", async () => {
    const t = await deletedExecutable(OTHER);
    mkfifo(t.name, OTHER);
    const r = await probe(t.pid, "other");
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^python=3\.\d+\.\d+ /);
    expectRunsOn(t.pid);
  });

  withShared("same uid, not root: a FIFO at a deleted libpython's name is refused in one line within the limit", async () => {
    const t = await deletedLibpython();
    mkfifo(t.name, OTHER);
    const r = await probe(t.pid, "other");
    expect(r.code).toBe(HELPER_EXIT.unreadable);
    expect(r.err).toBe(`gpumem-inject: cannot read process ${t.pid}'s interpreter ${t.name}: a FIFO at that name, not the mapped file; nothing was done to it`);
    expect(r.ms).toBeLessThan(PROBE_LIMIT_MS);
    expectRunsOn(t.pid);
  });

  withShared("same uid, not root: a symbolic link there to a FIFO is not followed", async () => {
    const t = await deletedLibpython();
    const fifo = join(dirOf(OTHER), "fifo");
    mkfifo(fifo, OTHER);
    symlinkSync(fifo, t.name);
    const r = await probe(t.pid, "other");
    expect(r.code).toBe(HELPER_EXIT.unreadable);
    expect(r.err).toBe(`gpumem-inject: cannot read process ${t.pid}'s interpreter ${t.name}: a symbolic link at that name, not the mapped file; nothing was done to it`);
    expectRunsOn(t.pid);
  });

  withShared("same uid, not root: a regular ELF planted at the name is not the file mapped (another inode) and is refused", async () => {
    const t = await deletedLibpython();
    copyFileSync(SHARED!.lib, t.name);
    const r = await probe(t.pid, "other");
    expect(r.code).toBe(HELPER_EXIT.unreadable);
    expect(r.err).toBe(`gpumem-inject: cannot read process ${t.pid}'s interpreter ${t.name}: the file at that name is not the one it mapped (replaced since it was loaded); nothing was done to it`);
  });

  asRoot("another mount namespace: a name gone from the target's root is never looked up in the monitor's (a FIFO there on the host)", async () => {
    // The target has a tmpfs of its own over dir (unshare -m): its executable copied there, started,
    // then deleted inside; on the host, dir holds a FIFO at the maps' name.
    const dir = dirOf(0);
    const inner = `mount -t tmpfs none '${dir}' && cp ${STATIC_PYTHON} '${dir}/python3' && exec '${dir}/python3' "$@"`;
    const pid = await sleeper(["unshare", "-m", "--propagation", "private", "sh", "-c", inner, "sh"]);
    unlinkSync(`/proc/${pid}/root${dir}/python3`);
    const name = `${dir}/python3 (deleted)`;
    expect(readFileSync(`/proc/${pid}/maps`, "utf8")).toContain(name);
    mkfifo(name, 0);
    const r = await probe(pid, "self");
    expect(r.err).toBe("");
    expect(r.code).toBe(0);
    expect(r.ms).toBeLessThan(PROBE_LIMIT_MS);
    expectRunsOn(pid);
  });
});

describe("a helper that runs past its limit is killed, said in one line, and its target runs on", () => {
  asRoot("a helper stalled with every thread of the target stopped: killed at the limit, the threads let go, the screens' event loop never blocked", async () => {
    // A python with a second thread, both sleeping in short steps (a target that runs).
    const pid = await sleeper(["python3"], {}, "import threading, time\nthreading.Thread(target=lambda: [time.sleep(0.01) for _ in iter(int, 1)], daemon=True).start()\nprint('ready', flush=True)\nwhile True: time.sleep(0.01)");
    // The event loop keeps turning while the helper works (the `a` key's attach runs inside the screens').
    let ticks = 0;
    let longest = 0;
    let last = performance.now();
    const timer = setInterval(() => {
      const now = performance.now();
      longest = Math.max(longest, now - last);
      last = now;
      ticks++;
    }, 10);
    const t0 = performance.now();
    const stalled = runHelper(["inject", String(pid), "/dev/stdin", "--test-stall-ms", "10000"], "import os; os._exit(3)\n", 1000);
    // While it stalls, the target is held: every thread stopped by the helper (polled within the
    // helper's 1 s: it was 500 ms of sleep, which a loaded machine can spend starting the helper).
    for (let i = 0; i < 45 && !running(pid).states.every((s) => s === "t"); i++) await Bun.sleep(20);
    expect(running(pid).states.every((s) => s === "t")).toBe(true);
    const r = await stalled;
    const ms = performance.now() - t0;
    clearInterval(timer);
    expect(r.code).toBe(HELPER_EXIT.killed);
    expect(r.error).toBe(`the helper (gpumem-inject inject) did not answer within 1 s and was stopped; process ${pid} was let go and runs on as it was`);
    expect(ms).toBeLessThan(2500);
    expect(ticks).toBeGreaterThan(40);
    expect(longest).toBeLessThan(250);
    await Bun.sleep(200);
    expectRunsOn(pid);
    // Nothing was queued in it: the text (which would end it with status 3) never runs.
    await Bun.sleep(300);
    expect(running(pid).tracer).toBe(0);
  });
});
