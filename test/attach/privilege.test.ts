// attach refuses what it cannot make safe, in one line with the true cause and a remedy that is the
// user's own (never root, never a setting of the whole machine): a setuid or file-capability
// interpreter, a target already traced, another mount or user namespace, a pid that names another
// process since. Real processes, real uids (setpriv), real namespaces (unshare), a real tracer
// (strace); the cases that need root or a tool to set up are skipped, and say why, without them.
import { describe, expect, test } from "bun:test";
import { chmodSync, copyFileSync, existsSync, mkdtempSync, readFileSync, readlinkSync, realpathSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lostProcess, privilegeRefused, ptraceRefused } from "../../src/attach/preflight";
import { buildInject } from "../../src/attach/helper";
import { parseNsLink, parseStatusCaps, parseStatusIds, parseTracerPid, startTicks } from "../../src/collect/procfs";
import { asUid, cli, startSleeper, testEnv } from "./support";

const root = process.getuid?.() === 0;
const OTHER = 5000;
const FULL = (1n << 41n) - 1n;

/** What no refusal may advise. */
const ADVISES_PRIVILEGE = /sudo|sysctl|as root|ptrace_scope=/;

function refusedLine(pid: number, reason: string): string {
  return `gpumem-tui: attach ${pid} refused: ${reason}\n`;
}

/** A copy of the system's python3 binary (readlink -f: the interpreter itself, not a launcher or
 *  shim) in a directory uid OTHER can enter, made setuid root or given a file capability; or why it
 *  cannot be had here. The kernel honours neither on a nosuid mount: checked, then seen to hold. */
function privilegedCopy(kind: "setuid" | "setcap"): { path: string } | { skip: string } {
  if (!root) return { skip: "needs root (chown, setcap, setpriv)" };
  const source = ["/usr/bin/python3", "/usr/local/bin/python3"].find((p) => existsSync(p));
  if (!source) return { skip: "no system python3 that another uid can run (/usr/bin/python3)" };
  const dir = mkdtempSync(join(tmpdir(), "gpumem-priv-"));
  chmodSync(dir, 0o755);
  const options = Bun.spawnSync(["findmnt", "-n", "-o", "OPTIONS", "-T", dir]).stdout.toString();
  if (/\bnosuid\b/.test(options)) return { skip: `${tmpdir()} is mounted nosuid: the kernel would ignore the ${kind}` };
  const path = join(dir, "python3");
  copyFileSync(realpathSync(source), path);
  if (kind === "setuid") chmodSync(path, 0o4755);
  else {
    if (!Bun.which("setcap")) return { skip: "no setcap here" };
    const p = Bun.spawnSync(["setcap", "cap_net_bind_service+ep", path], { stderr: "pipe" });
    if (p.exitCode !== 0) return { skip: `setcap failed: ${p.stderr.toString().trim()}` };
  }
  const seen = Bun.spawnSync([...asUid(OTHER), path, "-c", "print(open('/proc/self/status').read())"], { stdout: "pipe", stderr: "pipe" });
  const status = seen.stdout.toString();
  const held = kind === "setuid" ? /^Uid:\s+\d+\s+0\s/m.test(status) : /^CapEff:\s*0*[1-9a-f]/m.test(status);
  return held ? { path } : { skip: `the kernel did not honour the ${kind} copy here (${seen.stderr.toString().trim() || "its status shows none"})` };
}

const setuid = privilegedCopy("setuid");
const setcap = privilegedCopy("setcap");
for (const [kind, c] of [["setuid", setuid], ["setcap", setcap]] as const) if ("skip" in c) console.log(`skipped: the ${kind} python3 cases: ${c.skip}`);

describe("a program more privileged than its user is refused, whoever attaches", () => {
  test.skipIf("skip" in setuid)("a setuid-root copy of python3 started by another uid: as root, and as that uid", async () => {
    const t = await startSleeper([...asUid(OTHER), (setuid as { path: string }).path]);
    try {
      const env = testEnv();
      const line = refusedLine(
        t.pid,
        `process ${t.pid} runs setuid (real uid ${OTHER}, effective uid 0): attach does not reach into a program more privileged than the user who started it (the agent would act on that user's settings with its privileges); to look inside, start it from an interpreter without the setuid bit`,
      );
      // Before: root injected into it (the user's settings would have run as root); its user was
      // told "attach as its owner: sudo -u root".
      expect(cli(["attach", String(t.pid), "--no-monitor"], env)).toEqual({ code: 1, err: line });
      expect(cli(["attach", String(t.pid), "--no-monitor"], env, OTHER)).toEqual({ code: 1, err: line });
      expect(existsSync(env.GPUMEM_TUI_DIR)).toBe(false); // no token was written
    } finally {
      await t.end();
    }
  }, 30_000);

  test.skipIf("skip" in setcap)("a copy of python3 with a file capability (setcap cap_net_bind_service+ep): as root, and as its uid", async () => {
    const t = await startSleeper([...asUid(OTHER), (setcap as { path: string }).path]);
    try {
      const env = testEnv();
      const line = refusedLine(
        t.pid,
        `process ${t.pid} holds capabilities (cap_net_bind_service) though it runs as uid ${OTHER} (a file capability set with setcap, or an ambient set): attach does not reach into a program more privileged than its user; to look inside, start it from an interpreter without them`,
      );
      expect(cli(["attach", String(t.pid), "--no-monitor"], env)).toEqual({ code: 1, err: line });
      expect(cli(["attach", String(t.pid), "--no-monitor"], env, OTHER)).toEqual({ code: 1, err: line });
      expect(existsSync(env.GPUMEM_TUI_DIR)).toBe(false);
    } finally {
      await t.end();
    }
  }, 30_000);

  test("the rule, from the ids and capability sets (root attaching root's own training passes)", () => {
    const ids = (u: number[], g = [u[0]!, u[0]!, u[0]!, u[0]!]) => ({ uid: u, gid: g });
    const none = { permitted: 0n, effective: 0n };
    const all = { permitted: FULL, effective: FULL };
    const rootMonitor = { uid: 0, caps: FULL };
    // root's process with every capability, attached by root with every capability: ordinary.
    expect(privilegeRefused(7, ids([0, 0, 0, 0]), all, rootMonitor)).toBeNull();
    // ... by a root monitor that lacks one (a container's bounding set): refused, named.
    expect(privilegeRefused(7, ids([0, 0, 0, 0]), all, { uid: 0, caps: FULL & ~(1n << 24n) })).toMatch(/holds capabilities this monitor lacks \(cap_sys_resource\)/);
    // A user's plain process, attached by that user: passes; with a capability: refused.
    expect(privilegeRefused(7, ids([1000, 1000, 1000, 1000]), none, { uid: 1000, caps: 0n })).toBeNull();
    expect(privilegeRefused(7, ids([1000, 1000, 1000, 1000]), { permitted: 1n << 10n, effective: 0n }, { uid: 1000, caps: 0n })).toMatch(/holds capabilities \(cap_net_bind_service\) though it runs as uid 1000/);
    // setgid; and a saved uid kept to regain root after dropping it.
    expect(privilegeRefused(7, ids([1000, 1000, 1000, 1000], [1000, 50, 50, 50]), none, { uid: 1000, caps: 0n })).toMatch(/runs setgid \(real gid 1000, effective gid 50\)/);
    expect(privilegeRefused(7, ids([1000, 1000, 0, 1000]), none, { uid: 1000, caps: 0n })).toMatch(/runs setuid \(real uid 1000, saved uid 0\)/);
    // Another user's process: no sudo offered; root's: none at all.
    expect(privilegeRefused(7, ids([0, 0, 0, 0]), all, { uid: 1000, caps: 0n }, () => "root")).toBe("process 7 belongs to root (uid 0), not to you (uid 1000): attach reaches your own processes only");
    expect(privilegeRefused(7, ids([1000, 1000, 1000, 1000]), none, rootMonitor, () => "alice")).toBe(
      "process 7 belongs to alice (uid 1000), not to you (uid 0): attach reaches your own processes only; its owner can (`gpumem-tui attach 7` run as alice)",
    );
  });
});

describe("the true cause, not a capability the container lacks", () => {
  test.skipIf(!Bun.which("strace"))("a target another tracer holds (strace -p): that tracer named", async () => {
    const t = await startSleeper(["python3"]);
    const strace = Bun.spawn(["strace", "-p", String(t.pid), "-o", "/dev/null"], { stderr: "ignore" });
    try {
      for (let i = 0; i < 100 && !parseTracerPid(readFileSync(`/proc/${t.pid}/status`, "utf8")); i++) await Bun.sleep(50);
      const r = cli(["attach", String(t.pid), "--no-monitor"], testEnv());
      // Before: "ptrace … refused …: this container has no CAP_SYS_PTRACE" (or "may be traced already").
      expect(r).toEqual({ code: 1, err: refusedLine(t.pid, `process ${t.pid} is already traced by process ${strace.pid} (strace): a process has one tracer at a time; attach once that one has let go of it (end it, or detach it)`) });
    } finally {
      strace.kill();
      await strace.exited;
      await t.end();
    }
  }, 30_000);

  const unshareOk = Bun.which("unshare") !== null && Bun.spawnSync(["unshare", "-Urm", "true"]).exitCode === 0;
  if (!unshareOk) console.log("skipped: the namespace cases: unshare -Urm does not run here");

  test.skipIf(!unshareOk)("a same-user process in its own user and mount namespace (unshare -Urm): refused at once", async () => {
    const t = await startSleeper(["unshare", "-Urm", "python3"]);
    try {
      expect(readlinkSync(`/proc/${t.pid}/ns/mnt`)).not.toBe(readlinkSync("/proc/self/ns/mnt"));
      const began = performance.now();
      const r = cli(["attach", String(t.pid), "--no-monitor", "--timeout", "2"], testEnv());
      // Before: the bootstrap was injected, then "no safe point within 2 s" after those seconds.
      expect(r).toEqual({
        code: 1,
        err: refusedLine(t.pid, `process ${t.pid} runs in another user and mount namespace than this monitor (a container, or unshare): its /tmp and /dev/shm are not these, so the files attach and its agent share would not meet; run attach inside that namespace, where the program runs`),
      });
      expect(performance.now() - began).toBeLessThan(1900);
    } finally {
      await t.end();
    }
  }, 30_000);

  test.skipIf(!unshareOk || !root)("root's process in another pid namespace only (unshare -p -f): refused at once, not 'no safe point' after the wait", async () => {
    const t = await startSleeper(["unshare", "-p", "-f", "python3"]);
    // unshare forks: the program is its child, pid 1 in its namespace and another pid here.
    const child = Number(readFileSync(`/proc/${t.pid}/task/${t.pid}/children`, "utf8").trim().split(/\s+/)[0]);
    try {
      const started = Date.now();
      const r = cli(["attach", String(child), "--no-monitor", "--timeout", "10"], testEnv());
      expect(r).toEqual({
        code: 1,
        err: refusedLine(child, `process ${child} runs in another pid namespace than this monitor (a container, or unshare): it has another pid there than ${child}, and its agent would name its files by that one, which attach would never find; run attach inside that namespace, where the program runs`),
      });
      expect(Date.now() - started).toBeLessThan(5_000);
    } finally {
      // Killing unshare leaves its child sleeping on (no --kill-child): the child is killed by its pid.
      try {
        process.kill(child, "SIGKILL");
      } catch {
        // gone already
      }
      await t.end();
    }
  }, 30_000);

  test.skipIf(!unshareOk || !root)("root's process in another mount namespace only (unshare -m)", async () => {
    const t = await startSleeper(["unshare", "-m", "python3"]);
    try {
      const r = cli(["attach", String(t.pid), "--no-monitor", "--timeout", "2"], testEnv());
      expect(r.code).toBe(1);
      expect(r.err).toStartWith(refusedLine(t.pid, `process ${t.pid} runs in another mount namespace than this monitor`).slice(0, -1));
    } finally {
      await t.end();
    }
  }, 30_000);
});

describe("ptrace refusals: the cause, and a remedy the user can take", () => {
  const base = { hasCapPtrace: false, inContainer: false, isDescendant: false };
  test("Yama's scopes: `run` instead, never the sysctl nor root", () => {
    for (const scope of [1, 2, 3]) {
      const line = ptraceRefused(7, { ...base, yamaScope: scope });
      expect(line).toMatch(new RegExp(`kernel\\.yama\\.ptrace_scope is ${scope} .*: start the program under \`gpumem-tui run\` instead`));
      expect(line).not.toMatch(ADVISES_PRIVILEGE);
    }
  });
  test("a tracer there: named, whatever Yama and the container say", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 1, inContainer: true, tracer: { pid: 9, name: "py-spy" } })).toBe(
      "process 7 is already traced by process 9 (py-spy): a process has one tracer at a time; attach once that one has let go of it (end it, or detach it)",
    );
  });
  test("a container without the capability; and the kernel's own refusal", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 0, inContainer: true })).toMatch(/this container has no CAP_SYS_PTRACE .*`--cap-add SYS_PTRACE`/);
    expect(ptraceRefused(7, { ...base, yamaScope: 1, hasCapPtrace: true })).toMatch(/the kernel refused it \(a security module .*\): start the program under `gpumem-tui run` instead/);
  });
});

describe("the process asked for is the one attached (pid and start time)", () => {
  test.skipIf("skip" in setuid)("--wait: a program that execs a setuid interpreter while attach waits (same pid, same start) is refused as such", async () => {
    const python = (setuid as { path: string }).path;
    const after = "import time; time.sleep(60)";
    const before = `import os, sys, time; print('ready', flush=True); time.sleep(2.5); os.execv(${JSON.stringify(python)}, [${JSON.stringify(python)}, '-c', ${JSON.stringify(after)}])`;
    // The attacher is the program's own user: its helper must be built already (it cannot write it).
    expect(buildInject().ok).toBe(true);
    const t = Bun.spawn([...asUid(OTHER), "/usr/bin/python3", "-c", before], { stdout: "pipe", stderr: "pipe" });
    try {
      const reader = t.stdout.getReader();
      await reader.read(); // "ready"
      const r = cli(["attach", String(t.pid), "--wait", "--no-monitor"], { ...testEnv(), GPUMEM_TUI_ATTACH_ANY_PYTHON: "0" }, OTHER);
      // Before: "no process PID: check the pid" (its maps, not dumpable now, unreadable by the wait).
      expect(r).toEqual({
        code: 1,
        err: `gpumem-tui: waiting for process ${t.pid}: process ${t.pid} has not imported torch yet\n${refusedLine(t.pid, `process ${t.pid} runs setuid (real uid ${OTHER}, effective uid 0): attach does not reach into a program more privileged than the user who started it (the agent would act on that user's settings with its privileges); to look inside, start it from an interpreter without the setuid bit`)}`,
      });
    } finally {
      t.kill(9);
      await t.exited;
    }
  }, 30_000);


  test("a live process is itself; a start time not its own is another process; gone, it exited", async () => {
    const p = Bun.spawn(["sleep", "30"]);
    const start = startTicks(p.pid);
    expect(start).not.toBeNull();
    expect(lostProcess(p.pid, start)).toBeNull();
    // The pid held by a process started at another time: what a reused pid looks like.
    expect(lostProcess(p.pid, start! - 1)).toBe("reused");
    p.kill(9);
    await p.exited;
    expect(lostProcess(p.pid, start)).toBe("exited");
    expect(lostProcess(p.pid, null)).toBe("exited");
  });
});

test("/proc/PID/status's ids, capability sets and tracer, and a namespace link of each kind", () => {
  const status = "Name:\tpython3\nTracerPid:\t812\nUid:\t5000\t0\t0\t0\nGid:\t5000\t5000\t5000\t5000\nCapPrm:\t0000000000000400\nCapEff:\t0000000000000400\n";
  expect(parseStatusIds(status)).toEqual({ uid: [5000, 0, 0, 0], gid: [5000, 5000, 5000, 5000] });
  expect(parseStatusCaps(status)).toEqual({ permitted: 0x400n, effective: 0x400n });
  expect(parseTracerPid(status)).toBe(812);
  // A line cut short or missing: unknown, not zero.
  expect(parseStatusIds("Uid:\t5000\t0\nGid:\t1\t1\t1\t1\n")).toBeNull();
  expect(parseStatusCaps("CapPrm:\t0\n")).toBeNull();
  expect(parseTracerPid("Name:\tx\n")).toBeNull();
  expect(parseNsLink("mnt:[4026531841]", "mnt")).toBe(4026531841);
  expect(parseNsLink("mnt:[4026531841]")).toBeNull(); // a pid namespace was asked for
  expect(parseNsLink("user:[4026531837]", "user")).toBe(4026531837);
});
