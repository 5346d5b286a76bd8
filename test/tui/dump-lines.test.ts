// Issue 37: `d` on the screens of a live `run` writes a snapshot that carries the program's frames
// (the hook's stacks, on by default): each allocation of the trace names the line that asked for
// it, as memory_viz shows it. A real terminal (tmux), the real CLI, agent and walker on this
// machine's CPython, torch and the hook replaced by their doubles (test/agent/lines_run.py: a leak
// of 2 MiB a step at line:keep, lingering while `d` is pressed).
import { afterAll, describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { unpickle } from "../../src/snapshot/pickle";
import { buildLibrary, STACKS_SKIP } from "../support/native";
import { LINES_RUN, markedAt, TORCH_DOUBLE } from "../support/lines-run";
import { cannot, q, terminal } from "../support/tmux";

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Any = any;
const ROOT = join(import.meta.dir, "..", "..");
const dir = mkdtempSync(join(tmpdir(), "gpumem-dump-lines-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const skip = cannot ?? STACKS_SKIP;

describe("d on a live run with the hook's stacks", () => {
  (skip ? test.skip : test)(`the snapshot's trace names the program's line of each kept tensor${skip ? ` ${skip}` : ""}`, async () => {
    const dumps = join(dir, "dumps");
    const agents = join(dir, "agents");
    mkdirSync(dumps);
    mkdirSync(agents, { mode: 0o700 });
    const ring = join(dir, "leak.ring");
    const env = `GPUMEM_TEST_HOOK_DOUBLE=${q(buildLibrary("hook_double"))} GPUMEM_TUI_LIBRARY=${q(TORCH_DOUBLE)} GPUMEM_TUI_DIR=${q(agents)} GPUMEM_TUI_RING_CAPACITY=4096`;
    const t = terminal("dump-lines", `cd ${q(ROOT)} && env ${env} bun src/cli.ts --dump-dir ${q(dumps)} run -- python3 ${q(LINES_RUN)} leak ${q(ring)} --linger 20`, 160, 40);
    try {
      for (let i = 0; i < 300 && !existsSync(`${ring}.trained`); i++) await Bun.sleep(100);
      expect(existsSync(`${ring}.trained`)).toBe(true);
      await t.until("1 Overview");
      await Bun.sleep(1500); // a tick of the monitor after the last step
      t.keys("d");
      await t.until(/snapshot of pid \d+/);
      const files = readdirSync(dumps).filter((f) => f.endsWith(".pickle"));
      expect(files.length).toBe(1);
      const s = unpickle(new Uint8Array(readFileSync(join(dumps, files[0]!)))) as Any;
      const keep = markedAt("keep");
      const allocs = s.device_traces[0].filter((e: Any) => e.action === "alloc" && e.size === 2 * 2 ** 20);
      expect(allocs.length).toBe(10);
      for (const e of allocs) expect(e.frames.map((f: Any) => `${f.filename}:${f.line}`)).toContain(keep);
    } finally {
      t.close();
    }
  }, 60_000);
});
