// When the monitor asks an agent for names, and when it applies the reply: the policy on a model
// fed by hand; the real agent answers the same verb on the GPU (test/agent, test/gpu/e2e-hf.ts).
import { describe, expect, test } from "bun:test";
import { ASK_EVERY_MS, NameRequests } from "../../src/collect/name-requests";
import type { Reply } from "../../src/collect/control";
import { blocks, createModel } from "../../src/profiler";
import { MiB, Trace, trainingStep } from "../profiler/trace";

function agent(tensors: unknown[], write_index: number) {
  const asked: string[] = [];
  const ask = async (_socket: string, cmd: string, args: Record<string, unknown>): Promise<Reply> => {
    expect(args).toEqual({ at_step: true });
    asked.push(cmd);
    return { ok: true, tensors, skipped: 0, scan_ms: 1.5, scan: false, write_index, step: 1 };
  };
  return { asked, ask };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe("names asked of the agent", () => {
  test("when it appears, after its first step, then only for large unnamed blocks and at most every 10 s", async () => {
    const tr = new Trace().alloc(0x5000_0000, 32 * MiB);
    const m = createModel();
    m.ingest(tr.batch());
    const a = agent([{ address: 0x5000_0000, size: 32 * MiB, name: "w", category: "parameter", shape: [8, 1048576], dtype: "float32", device: 0 }], 1);
    const n = new NameRequests(a.ask);
    n.askIfDue("/sock", m, 0);
    await settle();
    expect(n.status).toMatchObject({ requests: 1, reason: "the agent appeared" });
    // the reply waits until the ring has been read up to its write index
    expect(n.apply(m, 0, 10)).toBe(false);
    expect(n.apply(m, 1, 10)).toBe(true);
    expect(blocks(m).blocks[0]).toMatchObject({ name: "w", shape: [8, 1048576] });
    expect(n.status).toMatchObject({ tensors: 1, matched: 1, agent_ms: 1.5 });
    n.askIfDue("/sock", m, 100);
    expect(a.asked.length).toBe(1); // step 0, everything named: nothing to ask
    const before = tr.rows.length;
    trainingStep(tr, { firstStep: true }); // a step: a 4 MiB gradient outlives backward, unnamed
    m.ingest(tr.batch(before));
    n.askIfDue("/sock", m, 200);
    await settle();
    expect(n.status.reason).toBe("after the first optimizer step");
    n.askIfDue("/sock", m, 300);
    expect(a.asked.length).toBe(2); // 4 MiB unnamed is below the bar, and 10 s have not passed
    const more = tr.rows.length;
    tr.setPhase(3).alloc(0x6000_0000, 64 * MiB).setPhase(0); // optimizer state made in the optimizer phase
    m.ingest(tr.batch(more));
    n.askIfDue("/sock", m, 400);
    expect(a.asked.length).toBe(2);
    n.askIfDue("/sock", m, 200 + ASK_EVERY_MS);
    await settle();
    expect(a.asked.length).toBe(3);
    expect(n.status.reason).toMatch(/^\d+ MiB in unnamed blocks$/);
  });

  test("a failed reply is said, and names nothing", async () => {
    const n = new NameRequests(async () => ({ ok: false, error: "names: cannot reach the agent at /sock: ENOENT" }));
    const m = createModel();
    m.ingest(new Trace().alloc(0x1000, MiB).batch());
    n.askIfDue("/sock", m, 0);
    await settle();
    expect(n.status.error).toBe("names: cannot reach the agent at /sock: ENOENT");
    expect(n.apply(m, 10, 0)).toBe(false);
  });
});

describe("a lapped ring", () => {
  test("records lost since the last request: the agent's names are asked again and fill the lost blocks back in", async () => {
    const tr = new Trace().alloc(0x1000, MiB).alloc(0x5000_0000, 8 * MiB);
    const m = createModel();
    m.ingest(tr.batch(0, 1));
    const a = agent([{ address: 0x5000_0000, size: 8 * MiB, name: "w", category: "parameter", shape: [2, 1048576], dtype: "float32", device: 0 }], 0);
    const n = new NameRequests(a.ask);
    n.askIfDue("/sock", m, 0);
    await settle();
    n.apply(m, 0, 0);
    m.ingest(tr.batch(1, 1), 1); // the alloc of w was lapped
    n.askIfDue("/sock", m, 1000);
    expect(a.asked.length).toBe(1); // within 10 s of the last request
    n.askIfDue("/sock", m, ASK_EVERY_MS);
    await settle();
    expect(n.status.reason).toBe("records were lost: names fill the blocks back in");
    n.apply(m, 0, ASK_EVERY_MS);
    expect(n.status.added).toBe(1);
    expect(blocks(m, { sort: "address" }).blocks.map((b) => b.name)).toEqual([null, "w"]);
  });
});
