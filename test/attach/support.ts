// Targets to attach to (test/attach/target.py) and the attach under test, with a private agents'
// directory per test and the test-only switches (any python3, the probe payload) set.
import { expect } from "bun:test";
import { chownSync, mkdtempSync, readdirSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { attachProcess, type AttachOptions } from "../../src/attach/attach";
import { PAYLOAD_ENV } from "../../src/attach/bootstrap";
import { ANY_PYTHON_ENV } from "../../src/attach/preflight";
import { parseStatState, parseTracerPid } from "../../src/collect/procfs";
import { ROOT } from "../../src/root";

export const TARGET = join(ROOT, "test/attach/target.py");
export const PROBE = join(ROOT, "test/attach/payload/attach_probe.py");

export function testEnv(): NodeJS.ProcessEnv & { GPUMEM_TUI_DIR: string } {
  const dir = join(mkdtempSync(join(tmpdir(), "gpumem-attach-")), "agents");
  return { ...process.env, GPUMEM_TUI_DIR: dir, [ANY_PYTHON_ENV]: "1", [PAYLOAD_ENV]: PROBE };
}

export interface Target {
  pid: number;
  tids: Record<string, number>;
  proc: ReturnType<typeof Bun.spawn>;
  /** Its stdout and exit status once it ended. */
  done: Promise<{ stdout: string; code: number }>;
}

/** Start target.py in MODE and wait until it says it is ready. */
export async function startTarget(mode: string, code: number, ...extra: string[]): Promise<Target> {
  const proc = Bun.spawn(["python3", TARGET, mode, String(code), ...extra], { stdout: "pipe", stderr: "pipe" });
  const reader = proc.stderr.getReader();
  let text = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`target ${mode} ended before it was ready: ${text}`);
    text += new TextDecoder().decode(value);
    const m = /ready (\{.*\})\n/.exec(text);
    if (m) {
      reader.releaseLock();
      const stdout = new Response(proc.stdout).text();
      const done = (async () => ({ stdout: await stdout, code: await proc.exited }))();
      return { pid: proc.pid, tids: JSON.parse(m[1]!), proc, done };
    }
  }
}

/** The same program left alone: what its output and status must stay. */
export async function baseline(mode: string, code: number, ...extra: string[]): Promise<{ stdout: string; code: number }> {
  const p = Bun.spawn(["python3", TARGET, mode, String(code), ...extra], { stdout: "pipe", stderr: "ignore" });
  return { stdout: await new Response(p.stdout).text(), code: await p.exited };
}

export function attach(pid: number, env: NodeJS.ProcessEnv, extra: Partial<AttachOptions> = {}) {
  return attachProcess(pid, { timeoutS: 5, wait: false, env, agentWaitS: 10, ...extra });
}

/** What the probe payload recorded in the target (one line per attach). */
export function probeRecords(env: { GPUMEM_TUI_DIR: string }, pid: number): { pid: number; boot: { main_thread: boolean; thread: number; frame: unknown }; payload_thread: number; main: number }[] {
  try {
    return readFileSync(join(env.GPUMEM_TUI_DIR, `probe-${pid}.jsonl`), "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

export function agentFiles(env: { GPUMEM_TUI_DIR: string }): string[] {
  try {
    return readdirSync(env.GPUMEM_TUI_DIR).filter((f) => !f.startsWith("probe-"));
  } catch {
    return [];
  }
}

export function counts(pid: number): { maps: number; fds: number; threads: number } {
  return {
    maps: readFileSync(`/proc/${pid}/maps`, "utf8").trim().split("\n").length,
    fds: readdirSync(`/proc/${pid}/fd`).length,
    threads: readdirSync(`/proc/${pid}/task`).length,
  };
}

/** `gpumem-tui ARGS` through the command line, as this process's user or, with `uid`, as that one
 *  (setpriv; its HOME a directory of its own, for bun's cache). */
export function cli(args: string[], env: NodeJS.ProcessEnv, uid?: number): { code: number; err: string } {
  let cmd = ["bun", `${ROOT}/src/cli.ts`, ...args];
  if (uid !== undefined) {
    const home = mkdtempSync(join(tmpdir(), "gpumem-home-"));
    chownSync(home, uid, uid);
    env = { ...env, HOME: home };
    cmd = [...asUid(uid), ...cmd];
  }
  const p = Bun.spawnSync(cmd, { env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, err: p.stderr.toString() };
}

/** The command prefix that runs a command as `uid` (and its gid), no other groups. */
export function asUid(uid: number): string[] {
  return ["setpriv", "--reuid", String(uid), "--regid", String(uid), "--clear-groups", "--"];
}

/** What startSleeper's python runs unless told: it says it runs, then sleeps. */
export const SLEEP = "import time; print('ready', flush=True); time.sleep(120)";

/** A Python that sleeps: `python` is the interpreter's command, with what runs it first (setpriv,
 *  unshare, a copy of the interpreter). Returned once it said it runs: its pid is then the
 *  interpreter's (the commands before it exec'd it). `code` is what it runs instead (it must print
 *  `ready`), `env` added to this process's environment. */
export async function startSleeper(python: string[], opts: { env?: Record<string, string>; code?: string } = {}): Promise<{ pid: number; proc: ReturnType<typeof Bun.spawn>; end: () => Promise<void> }> {
  const argv = python;
  const proc = Bun.spawn([...argv, "-c", opts.code ?? SLEEP], { stdout: "pipe", stderr: "pipe", env: { ...process.env, ...opts.env } });
  const reader = proc.stdout.getReader();
  let text = "";
  while (!text.includes("ready\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`${argv.join(" ")} ended before it was ready: ${await new Response(proc.stderr).text()}`);
    text += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  return {
    pid: proc.pid,
    proc,
    async end() {
      proc.kill(9);
      await proc.exited;
    },
  };
}

/** Every thread's state letter (/proc/PID/task/TID/stat) and the tracer (TracerPid:): a target a
 *  helper let go runs on (no `t` or `T`, no tracer). */
export function running(pid: number): { states: (string | null)[]; tracer: number | null } {
  const states = readdirSync(`/proc/${pid}/task`).map((tid) => parseStatState(readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8")));
  return { states, tracer: parseTracerPid(readFileSync(`/proc/${pid}/status`, "utf8")) };
}

export function expectRunsOn(pid: number): void {
  const r = running(pid);
  expect(r.tracer).toBe(0);
  expect(r.states.filter((s) => s === "t" || s === "T")).toEqual([]);
}
