// attach's refusals, through the command line: one line each, with its remedy, exit status 1, and
// nothing written into the target. Privilege, tracers, namespaces and Yama's messages:
// privilege.test.ts.
import { describe, expect, test } from "bun:test";
import { isLauncher } from "../../src/attach/ranks";
import { asUid, attach, cli, startSleeper, startTarget, testEnv } from "./support";
import { detachProcess } from "../../src/commands/detach";

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

  test.skipIf(process.getuid?.() !== 0)("another user's process, either way round (setpriv, as root): no sudo offered, none at all for root's", async () => {
    // Before: "attach as its owner: sudo -u NAME gpumem-tui attach PID", "sudo -u root" for root's.
    const theirs = await startSleeper([...asUid(5000), "/usr/bin/python3"]);
    const ours = await startSleeper(["python3"]);
    try {
      expect(cli(["attach", String(theirs.pid), "--no-monitor"], testEnv())).toEqual({
        code: 1,
        err: `gpumem-tui: attach ${theirs.pid} refused: process ${theirs.pid} belongs to uid 5000, not to you (uid 0): attach reaches your own processes only; its owner can (\`gpumem-tui attach ${theirs.pid}\` run as uid 5000)\n`,
      });
      expect(cli(["attach", String(ours.pid), "--no-monitor"], testEnv(), 5000)).toEqual({
        code: 1,
        err: `gpumem-tui: attach ${ours.pid} refused: process ${ours.pid} belongs to root (uid 0), not to you (uid 5000): attach reaches your own processes only\n`,
      });
    } finally {
      await theirs.end();
      await ours.end();
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

test("launchers: torchrun and python -m torch.distributed.run", () => {
  expect(isLauncher(["/usr/bin/python3", "/usr/local/bin/torchrun", "--nproc-per-node", "2", "train.py"])).toBe(true);
  expect(isLauncher(["python", "-m", "torch.distributed.run", "train.py"])).toBe(true);
  expect(isLauncher(["python", "train.py"])).toBe(false);
});
