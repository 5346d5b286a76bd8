// A program started without the agent, attached while it runs (gpumem_agent.attach_running, as
// the bootstrap calls it; torch and the hook are the doubles, test/agent/attach_target.py), read by
// the monitor as any agent: the seed in its first manifest is applied before its records, so the
// blocks are the allocator's own, parameters and optimizer state from before the attach included,
// and the detail is whole. Then `detach`: the agent and its files go, the program runs on.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentWatcher } from "../../src/collect/agents";
import { command } from "../../src/collect/control";
import { LiveModels } from "../../src/collect/live";
import { ROOT } from "../../src/ffi/build";
import { blocks, summary } from "../../src/profiler";
import { buildLibrary } from "../support/native";

test("attached mid-run: the monitor's blocks equal the allocator's, whole, from before the attach on; detach leaves nothing", async () => {
  const tokens = mkdtempSync(join(tmpdir(), "gpumem-attach-tokens-"));
  const dir = mkdtempSync(join(tmpdir(), "gpumem-attach-agents-"));
  const p = Bun.spawn(["python3", join(ROOT, "test", "agent", "attach_target.py"), "--tokens", tokens, "--steps", "30", "--step-seconds", "0.01", "--start-after", "10", "--linger", "30"], {
    stdout: "pipe",
    stderr: "pipe",
    env: { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TUI_DIR: dir, GPUMEM_TUI_RING_CAPACITY: "4096", GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") },
  });
  const reader = p.stdout.getReader();
  let out = "";
  const waitFor = async (re: RegExp) => {
    while (!re.test(out)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the program ended: ${out}`);
      out += new TextDecoder().decode(value);
    }
    return re.exec(out)!;
  };
  try {
    await waitFor(/step 9\n/);
    const token = join(tokens, "attach-1");
    writeFileSync(token, "{}", { mode: 0o600 });
    await waitFor(/attached \S+\n/);
    const [, live, count] = await waitFor(/done (\d+) (\d+)\n/);
    const watcher = new AgentWatcher(dir);
    const models = new LiveModels();
    const agents = watcher.refresh();
    expect(agents.map((a) => a.pid)).toEqual([p.pid]);
    models.update(agents, null, Date.now() * 1000);
    const m = models.byPid.get(p.pid)!.model;
    expect(m.seedStatus).toMatchObject({ state: "applied", reason: null });
    expect(m.seedStatus!.blocks).toBeGreaterThanOrEqual(6); // 2 parameters, 2 AdamW states each, and more
    const d = summary(m).devices[0]!;
    expect(d.partial_causes).toEqual([]);
    expect(d.allocated_events_bytes).toBe(Number(live));
    expect(d.live_blocks).toBe(Number(count));
    const before = blocks(m, { limit: Infinity }).blocks.filter((b) => b.category_source === "before_attach");
    expect(before.map((b) => b.size_bytes).filter((s) => s === 4 * 2 ** 20).length).toBe(3); // wte, its exp_avg and exp_avg_sq
    // steps count from the attach
    expect(d.step).toBe(20);
    const reply = await command(agents[0]!.manifest.socket!, "detach", {});
    expect(reply.ok).toBe(true);
    for (let i = 0; i < 100 && readdirSync(dir).length > 0; i++) await Bun.sleep(50);
    expect(readdirSync(dir)).toEqual([]);
    expect(existsSync(token)).toBe(false); // claimed
    expect(existsSync(token + ".error")).toBe(false);
    expect(watcher.refresh()).toEqual([]); // a process without an agent again
  } finally {
    p.kill();
    await p.exited;
  }
}, 60_000);
