// Who owns an attach: a monitor whose screens open on it (the `attach` verb at a terminal, the `a`
// key) hands the agent its pid and /proc start time, so that the agent detaches when that monitor
// exits; `--no-monitor` (or no terminal to open the screens on) hands nothing, and the agent stays
// until `detach`. The probe payload records what attach_running was called with.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { ANY_PYTHON_ENV } from "../../src/attach/preflight";
import { PAYLOAD_ENV } from "../../src/attach/bootstrap";
import { detachProcess } from "../../src/commands/detach";
import { ROOT } from "../../src/root";
import { Controller } from "../../src/tui/controller";
import { cannot, q, terminal } from "../support/tmux";
import { attach, probeRecords, startTarget, testEnv } from "./support";

/** Field 22 of /proc/PID/stat, read here on its own: what the agent compares (attaching.py). */
function startOf(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19]);
}

function cli(args: string[], env: NodeJS.ProcessEnv) {
  const p = Bun.spawnSync(["bun", `${ROOT}/src/cli.ts`, ...args], { env, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, err: p.stderr.toString() };
}

async function serving(env: { GPUMEM_TUI_DIR: string }) {
  const t = await startTarget("serve", 0, `${env.GPUMEM_TUI_DIR}.stop`);
  return {
    t,
    async end() {
      await detachProcess(t.pid, env);
      await Bun.write(`${env.GPUMEM_TUI_DIR}.stop`, "");
      expect(await t.done).toEqual({ stdout: "checksum served\n", code: 0 });
    },
  };
}

describe("the monitor that owns an attach reaches the agent", () => {
  test("owned: this process's pid and start time arrive in attach_running; not owned: neither", async () => {
    for (const owned of [true, false]) {
      const env = testEnv();
      const s = await serving(env);
      expect((await attach(s.t.pid, env, { owned })).ok).toBe(true);
      const [rec] = probeRecords(env, s.t.pid) as unknown as { monitor_pid: number | null; monitor_start: number | null }[];
      expect({ pid: rec!.monitor_pid, start: rec!.monitor_start }).toEqual(owned ? { pid: process.pid, start: startOf(process.pid) } : { pid: null, start: null });
      await s.end();
    }
  }, 30_000);

  test("`attach --no-monitor`, and `attach` with no terminal for the screens: nobody owns it", async () => {
    for (const args of [["--no-monitor"], []]) {
      const env = testEnv();
      const s = await serving(env);
      const r = cli(["attach", String(s.t.pid), ...args], env);
      expect(r).toEqual({ code: 0, err: expect.stringMatching(/^gpumem-tui: attached to process \d+/) });
      expect(probeRecords(env, s.t.pid).map((x) => [(x as never as { monitor_pid: unknown }).monitor_pid])).toEqual([[null]]);
      await s.end();
    }
  }, 30_000);

  test("the a key: the monitor's own pid and start time", async () => {
    const env = testEnv();
    const s = await serving(env);
    const saved = { ...process.env };
    Object.assign(process.env, { GPUMEM_TUI_DIR: env.GPUMEM_TUI_DIR, [ANY_PYTHON_ENV]: "1", [PAYLOAD_ENV]: env[PAYLOAD_ENV] });
    try {
      const ctl = new Controller(null, 1000);
      await ctl.attach(s.t.pid, "target.py");
      expect(ctl.status).toMatch(/^attached to process \d+/);
    } finally {
      for (const k of ["GPUMEM_TUI_DIR", ANY_PYTHON_ENV, PAYLOAD_ENV]) {
        if (saved[k] === undefined) delete process.env[k];
        else process.env[k] = saved[k];
      }
    }
    const [rec] = probeRecords(env, s.t.pid) as unknown as { monitor_pid: number; monitor_start: number }[];
    expect([rec!.monitor_pid, rec!.monitor_start]).toEqual([process.pid, startOf(process.pid)]);
    await s.end();
  }, 30_000);

  (cannot ? test.skip : test)(`\`attach\` at a terminal, its screens opened: that monitor's pid and start time${cannot ? ` (${cannot})` : ""}`, async () => {
    const env = testEnv();
    const s = await serving(env);
    const vars = ["GPUMEM_TUI_DIR", ANY_PYTHON_ENV, PAYLOAD_ENV].map((k) => `${k}=${q(env[k]!)}`).join(" ");
    const term = terminal("attach-owner", `env ${vars} bun ${q(`${ROOT}/src/cli.ts`)} attach ${s.t.pid}`);
    try {
      // Polled: it comes as soon as the attach is done; 30 s is headroom for a loaded machine.
      for (let i = 0; i < 300 && probeRecords(env, s.t.pid).length === 0; i++) await Bun.sleep(100);
      const [rec] = probeRecords(env, s.t.pid) as unknown as { monitor_pid: number; monitor_start: number }[];
      // The pid is the monitor's: the `attach` command's own process, started when the record says.
      const argv = readFileSync(`/proc/${rec!.monitor_pid}/cmdline`, "utf8").split("\0").filter(Boolean);
      expect(argv.slice(-2)).toEqual(["attach", String(s.t.pid)]);
      expect(rec!.monitor_start).toBe(startOf(rec!.monitor_pid));
      term.keys("q");
      await term.until("exit status 0");
    } finally {
      term.close();
      await s.end();
    }
  }, 60_000);
});
