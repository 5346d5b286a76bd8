// Pid namespaces and liveness from /proc: the NSpid line and the namespace's inode, on made-up /proc trees and
// on a real process in its own pid namespace (`unshare --pid --fork --mount-proc`, as root).
import { describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readFileSync, readlinkSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { inOtherPidNamespace, ownPidNamespace, parseNsLink, parseNsPid, parseStatExiting, parseStatState, pidAlive, pidEnding, pidNsInfo, readPidNamespace } from "../../src/collect/procfs";

describe("pid namespace readers", () => {
  test("NSpid: the reader's pid first, the process's own namespace's last", () => {
    expect(parseNsPid("Name:\tpython3\nTgid:\t7301\nNSpid:\t7301\t1\nNSpgid:\t7301\t1\n")).toEqual([7301, 1]);
    expect(parseNsPid("NSpid:\t7301\t57\t1\n")).toEqual([7301, 57, 1]);
    expect(parseNsPid("NSpid:\t4801\n")).toEqual([4801]);
    expect(parseNsPid("Name:\told-kernel\nPid:\t12\n")).toBeNull(); // kernels before 4.1 have no NSpid
    expect(parseNsLink("pid:[4026531836]")).toBe(4026531836);
    expect(parseNsLink("net:[4026531840]")).toBeNull();
  });

  test("from a /proc tree: a missing process or link is null, never a guess", () => {
    const root = mkdtempSync(join(tmpdir(), "gpumem-proc-"));
    mkdirSync(join(root, "7301", "ns"), { recursive: true });
    writeFileSync(join(root, "7301", "status"), "Name:\tpython3\nNSpid:\t7301\t1\n");
    symlinkSync("pid:[4026532178]", join(root, "7301", "ns", "pid"));
    expect(pidNsInfo(7301, root)).toEqual({ nspid: [7301, 1], pid_namespace: 4026532178 });
    expect(pidNsInfo(7302, root)).toEqual({ nspid: null, pid_namespace: null });
    expect(inOtherPidNamespace(4026532178, 4026531836)).toBe(true);
    expect(inOtherPidNamespace(4026531836, 4026531836)).toBe(false);
    expect(inOtherPidNamespace(null, 4026531836)).toBe(false);
    expect(inOtherPidNamespace(4026532178, null)).toBe(false);
  });

  test("this process: its own pid last, the namespace /proc/self/ns/pid names", () => {
    const own = pidNsInfo(process.pid);
    expect(own.nspid![own.nspid!.length - 1]).toBe(process.pid);
    expect(own.pid_namespace).toBe(parseNsLink(readlinkSync("/proc/self/ns/pid")));
    expect(ownPidNamespace()).toBe(own.pid_namespace);
  });
});

// Whether this machine lets us make a pid namespace (root, or a user namespace allowed).
const probe = Bun.which("unshare") ? Bun.spawnSync(["unshare", "--pid", "--fork", "--mount-proc", "true"], { stdout: "ignore", stderr: "pipe" }) : null;
const unshareSkip = !probe ? "(needs unshare from util-linux)" : probe.exitCode !== 0 ? `(unshare --pid is not permitted here: ${probe.stderr.toString().trim() || `status ${probe.exitCode}`})` : null;
const nsTest = unshareSkip ? (name: string, fn: () => Promise<void>) => test.skip(`${name} ${unshareSkip}`, fn) : test;

/** The child of `pid` (unshare --fork's), once it is there. */
async function childOf(pid: number): Promise<number> {
  for (let i = 0; i < 200; i++) {
    try {
      const kids = readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8").trim();
      if (kids) return Number(kids.split(/\s+/)[0]);
    } catch {
      // not yet
    }
    await Bun.sleep(10);
  }
  throw new Error(`unshare (pid ${pid}) started no child`);
}

describe("a real process in its own pid namespace", () => {
  nsTest("the host pid of `unshare --pid --fork --mount-proc sleep 30` is pid 1 in a namespace of its own", async () => {
    const u = Bun.spawn(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", "sleep", "30"], { stdout: "ignore", stderr: "ignore" });
    let host = 0;
    try {
      host = await childOf(u.pid);
      // unshare forks, then the child execs sleep: wait for the exec.
      for (let i = 0; i < 200 && readFileSync(`/proc/${host}/comm`, "utf8").trim() !== "sleep"; i++) await Bun.sleep(10);
      const info = pidNsInfo(host);
      expect(info.nspid).toEqual([host, 1]);
      expect(info.pid_namespace).toBe(parseNsLink(readlinkSync(`/proc/${host}/ns/pid`)));
      expect(readPidNamespace(host)).toBe(info.pid_namespace);
      expect(info.pid_namespace).not.toBe(ownPidNamespace());
      expect(inOtherPidNamespace(info.pid_namespace)).toBe(true);
      // unshare itself stays in ours.
      expect(pidNsInfo(u.pid)).toEqual({ nspid: [u.pid], pid_namespace: ownPidNamespace() });
    } finally {
      // unshare ignores SIGTERM while it waits for its child: the child goes first.
      if (host) process.kill(host, "SIGKILL");
      u.kill("SIGKILL");
      await u.exited;
    }
  });
});

// A rank killed under torchrun stays a zombie until the launcher next polls its children (every 5 s
// by default): it has exited, though signal 0 still reaches it. A real zombie here: a child that
// exits under a parent that never waits for it.
test("pidAlive: a running process is alive; a zombie and a pid gone are not", async () => {
  const p = Bun.spawn(["python3", "-c", "import os, sys, time\npid = os.fork()\nif pid == 0: os._exit(3)\nprint(pid, flush=True)\ntime.sleep(30)"], { stdout: "pipe" });
  try {
    const reader = p.stdout.getReader();
    let out = "";
    while (!out.includes("\n")) out += new TextDecoder().decode((await reader.read()).value);
    const child = Number(out.trim());
    for (let i = 0; i < 100 && parseStatState(readFileSync(`/proc/${child}/stat`, "latin1")) !== "Z"; i++) await Bun.sleep(20);
    expect(parseStatState(readFileSync(`/proc/${child}/stat`, "latin1"))).toBe("Z");
    expect(pidAlive(child)).toBe(false);
    expect(pidAlive(p.pid)).toBe(true);
    expect(pidAlive(process.pid)).toBe(true);
    // The kernel's PF_EXITING stays set on the zombie: exiting, as an attach that raced it says.
    expect(parseStatExiting(readFileSync(`/proc/${child}/stat`, "latin1"))).toBe(true);
    expect(parseStatExiting(readFileSync(`/proc/${p.pid}/stat`, "latin1"))).toBe(false);
    expect(pidEnding(child)).toBe(true);
    expect(pidEnding(p.pid)).toBe(false);
  } finally {
    p.kill();
    await p.exited;
  }
  expect(pidAlive(p.pid)).toBe(false);
});

test("parseStatExiting: bit 0x4 of the flags (field 9), whatever the command holds", () => {
  expect(parseStatExiting("42 (py) S 1 42 42 0 -1 4194560 0")).toBe(false);
  expect(parseStatExiting("42 (a) 4 (b)) Z 1 42 42 0 -1 4227084 0")).toBe(true);
  expect(parseStatExiting("42 (python3) S 1")).toBe(false);
  expect(parseStatExiting("")).toBe(false);
});

test("parseStatState: the letter after the command, whatever the command holds", () => {
  expect(parseStatState("42 (python3) S 1 42")).toBe("S");
  expect(parseStatState("42 (a) Z (b)) Z 1 42")).toBe("Z");
  expect(parseStatState("42 (python3)")).toBeNull();
  expect(parseStatState("")).toBeNull();
});
