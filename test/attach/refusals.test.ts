// attach's refusals, through the command line: one line each, with its remedy, exit status 1, and
// nothing written into the target. Yama cannot be set here: its messages are tested as functions.
import { describe, expect, test } from "bun:test";
import { ROOT } from "../../src/root";
import { ptraceRefused } from "../../src/attach/preflight";
import { isLauncher } from "../../src/attach/ranks";
import { attach, startTarget, testEnv } from "./support";
import { detachProcess } from "../../src/commands/detach";

function cli(args: string[], env: NodeJS.ProcessEnv): { code: number; err: string } {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/cli.ts`, ...args], { env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode ?? -1, err: p.stderr.toString() };
}

describe("attach refuses, in one line with its remedy", () => {
  test("no such process", () => {
    const r = cli(["attach", "4000000", "--no-monitor"], testEnv());
    expect(r.code).toBe(1);
    // In a container, where it may run outside: said too.
    expect(r.err).toMatch(/^gpumem-tui: attach 4000000 refused: no process 4000000: check the pid \(nvidia-smi and `gpumem-tui --json --once` list GPU processes\)( \(if it runs outside this container, in another PID namespace, run attach where it runs\))?\n$/);
  });

  test("a process that is not CPython", async () => {
    const p = Bun.spawn(["sleep", "100"]);
    try {
      const r = cli(["attach", String(p.pid), "--no-monitor"], testEnv());
      expect(r.code).toBe(1);
      expect(r.err).toBe(`gpumem-tui: attach ${p.pid} refused: process ${p.pid} is not a CPython process (no Py_AddPendingCall in its executable or a libpython): attach reaches Python programs only; others show as NVML rows\n`);
    } finally {
      p.kill();
    }
  });

  test("torch not imported: refused with --wait offered (the test-only switch off)", async () => {
    const t = await startTarget("serve", 0, "/nonexistent/never");
    try {
      const env = { ...testEnv(), GPUMEM_TUI_ATTACH_ANY_PYTHON: "0" };
      const r = cli(["attach", String(t.pid), "--no-monitor"], env);
      expect(r).toEqual({ code: 1, err: `gpumem-tui: attach ${t.pid} refused: process ${t.pid} has not imported torch yet: nothing to see inside; \`gpumem-tui attach ${t.pid} --wait\` waits until it has\n` });
    } finally {
      t.proc.kill();
    }
  });

  test.skipIf(process.getuid?.() !== 0)("another user's process (setpriv, as root)", async () => {
    const p = Bun.spawn(["setpriv", "--reuid", "4242", "--regid", "4242", "--clear-groups", "/usr/bin/python3", "-c", "import time; time.sleep(30)"]);
    await Bun.sleep(300);
    try {
      const r = cli(["attach", String(p.pid), "--no-monitor"], testEnv());
      expect(r.code).toBe(1);
      expect(r.err).toMatch(new RegExp(`^gpumem-tui: attach ${p.pid} refused: process ${p.pid} belongs to (\\S+ \\()?uid 4242\\)?, not to you \\(uid 0\\): attach as its owner: .*\\n$`));
    } finally {
      p.kill();
    }
  });

  test("already attached: connect to it instead", async () => {
    const env = testEnv();
    const t = await startTarget("serve", 0, `${env.GPUMEM_TUI_DIR}.stop`);
    expect((await attach(t.pid, env)).ok).toBe(true);
    const r = cli(["attach", String(t.pid), "--no-monitor"], env);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(new RegExp(`already has an agent \\(.*/${t.pid}\\.json\\): open \`gpumem-tui\` to see it, or \`gpumem-tui detach ${t.pid}\` first\\n$`));
    const d = cli(["detach", String(t.pid)], env);
    expect(d).toEqual({ code: 0, err: `gpumem-tui: detached from process ${t.pid}: probe detached\n` });
    expect(cli(["detach", String(t.pid)], env)).toEqual({ code: 1, err: `gpumem-tui: detach ${t.pid}: no agent of yours runs in process ${t.pid} (nothing to detach)\n` });
    await Bun.write(`${env.GPUMEM_TUI_DIR}.stop`, "");
    expect(await t.done).toEqual({ stdout: "checksum served\n", code: 0 });
    expect((await detachProcess(t.pid, env)).ok).toBe(false);
  }, 20_000);

  test("usage: one PID, options only with attach", () => {
    const env = testEnv();
    expect(cli(["attach"], env).err).toBe("gpumem-tui: attach takes one PID (a process id)\nRun 'gpumem-tui --help' for the usage.\n");
    expect(cli(["detach", "x"], env).err).toBe("gpumem-tui: detach takes one PID (a process id)\nRun 'gpumem-tui --help' for the usage.\n");
    expect(cli(["attach", "1", "--timeout", "0"], env).err).toMatch(/^gpumem-tui: --timeout takes seconds/);
    expect(cli(["--wait"], env).err).toMatch(/^gpumem-tui: --wait, --timeout and --no-monitor go with attach/);
  });
});

describe("ptrace refusals say the exact fix", () => {
  const base = { hasCapPtrace: false, inContainer: false, isDescendant: false };
  test("Yama scope 1: the sysctl, or CAP_SYS_PTRACE", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 1 })).toMatch(/ptrace_scope is 1 .*`sudo sysctl kernel\.yama\.ptrace_scope=0`, or run attach as the same user with CAP_SYS_PTRACE/);
  });
  test("Yama scope 2 and 3", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 2 })).toMatch(/ptrace_scope is 2 \(admin only\): run attach with CAP_SYS_PTRACE/);
    expect(ptraceRefused(7, { ...base, yamaScope: 3 })).toMatch(/ptrace_scope is 3 .*`gpumem-tui run`/);
  });
  test("a container without the capability", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 0, inContainer: true })).toMatch(/`--cap-add SYS_PTRACE`/);
  });
  test("scope 1 with the capability or a child: not Yama's doing", () => {
    expect(ptraceRefused(7, { ...base, yamaScope: 1, hasCapPtrace: true })).toMatch(/traced already/);
  });
});

test("launchers: torchrun and python -m torch.distributed.run", () => {
  expect(isLauncher(["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py"])).toBe(true);
  expect(isLauncher(["python", "-m", "torch.distributed.run", "train.py"])).toBe(true);
  expect(isLauncher(["python", "train.py"])).toBe(false);
});
