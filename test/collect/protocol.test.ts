// The control protocol, defined once (src/collect/protocol.ts), held on both sides: the agent's
// protocol.py is generated from it and not stale; the agent's verbs, their arguments and defaults,
// the fields they answer and its category words are the definition's (test/agent/test_protocol.py);
// a real agent (torch and the hook are the doubles, test/agent/protocol_target.py) answers every
// verb with a reply the monitor's checks accept; and `d` on a live process writes one snapshot.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AgentWatcher } from "../../src/collect/agents";
import { answerOf, ask, command, type Answer } from "../../src/collect/control";
import { LiveModels, type ProcessModel } from "../../src/collect/live";
import { pythonProtocolStale } from "../../src/collect/protocol-gen";
import { VERBS, type ArgsOf, type Verb } from "../../src/collect/protocol";
import { ROOT } from "../../src/ffi/build";
import { checkTrace, type SegmentOut, type TraceEntry } from "../../src/snapshot/from-model";
import { parseSnapshotBytes } from "../../src/snapshot/read";
import { summarize } from "../../src/snapshot/summary";
import { Controller } from "../../src/tui/controller";
import { buildLibrary } from "../support/native";

test("the agent's protocol.py is what src/collect/protocol.ts gives (else: bun src/collect/protocol-gen.ts)", () => {
  expect(pythonProtocolStale()).toBe(false);
});

test("the agent answers each verb as defined: its methods, arguments, defaults, reply fields and category words (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(ROOT, "test", "agent", "test_protocol.py"), "-v"], { stdout: "pipe", stderr: "pipe" });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toContain("OK");
});

describe("a real agent on its control socket", () => {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-protocol-"));
  const agents = join(dir, "agents");
  let target: ReturnType<typeof Bun.spawn> & { stdin: import("bun").FileSink; stdout: ReadableStream<Uint8Array> };
  let socket = "";

  beforeAll(async () => {
    Bun.spawnSync(["mkdir", "-m", "700", agents]);
    target = Bun.spawn(["python3", join(ROOT, "test", "agent", "protocol_target.py")], {
      stdin: "pipe",
      stdout: "pipe",
      stderr: "inherit",
      env: { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TUI_DIR: agents, GPUMEM_TUI_RING_CAPACITY: "4096", GPUMEM_TEST_HOOK_DOUBLE: buildLibrary("hook_double") },
    }) as typeof target;
    const reader = target.stdout.getReader();
    let out = "";
    while (!out.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error(`the agent's program ended: ${out}`);
      out += new TextDecoder().decode(value);
    }
    reader.releaseLock();
    socket = /^ready (\S+)$/m.exec(out)![1]!;
  });

  afterAll(async () => {
    target.stdin.end(); // the program's own way out: its agent closes and removes its files
    await target.exited;
    rmSync(dir, { recursive: true, force: true });
  });

  // One request per verb, typed by the definition: a verb added there without one here is a type error.
  const requests: { [V in Verb]: ArgsOf<V>[] } = {
    info: [{}],
    names: [{}, { at_step: true }, { scan: true }],
    empty_cache: [{}],
    dump_snapshot: [{ only_with_trace: true }, { path: "" }],
    history: [{ enabled: true }, { enabled: false }],
    reset_peaks: [{}],
    lines: [{}],
    detach: [{}],
  };

  test("every verb answered with a reply the monitor's checks accept (detach: by an attached agent only)", async () => {
    const answers: Record<string, Answer<Verb>[]> = {};
    for (const verb of Object.keys(VERBS) as Verb[]) {
      answers[verb] = [];
      for (const args of requests[verb]) {
        const a = args as Record<string, unknown>;
        if (a.path === "") a.path = join(dir, "asked.pickle");
        answers[verb].push(await ask(socket, verb, a as ArgsOf<typeof verb>));
      }
    }
    const detach = answers.detach!;
    delete answers.detach;
    for (const [verb, list] of Object.entries(answers)) for (const a of list) expect({ verb, ...a }).toMatchObject({ verb, ok: true });
    expect(detach[0]).toEqual({ ok: false, error: expect.stringContaining("unknown command 'detach'") });
    const names = answers.names![1] as Answer<"names">;
    if (!names.ok) throw new Error(names.error);
    expect(names.reply.tensors.map((t) => [t.name, t.category])).toEqual(
      expect.arrayContaining([["wte.weight", "parameter"], ["wte.weight.grad", "gradient"], ["exp_avg of wte.weight", "optimizer_state"]]),
    );
    expect(answers.dump_snapshot![0]).toEqual({ ok: true, reply: { path: null, size: null, history: false } });
    expect(answers.dump_snapshot![1]).toMatchObject({ ok: true, reply: { path: join(dir, "asked.pickle") } });
    rmSync(join(dir, "asked.pickle"));
  });

  test("a request the protocol does not allow gets a one-line answer, and the agent goes on", async () => {
    const bad = await command(socket, "names", { scan: "yes" });
    expect(bad).toMatchObject({ ok: false, error: 'bad arguments: names: "scan" must be true or false' });
    expect((await command(socket, "history", {})).error).toBe('bad arguments: history needs "enabled"');
    expect((await ask(socket, "reset_peaks", {})).ok).toBe(true);
  });

  test("`r` resets torch's peaks in the agent and the model's with them: the one peak shown stays torch's", async () => {
    const pm = liveProcess(agents);
    const d = pm.model.devices[0]!;
    expect(d.peakAllocated).toBeGreaterThan(d.allocated); // the program freed memory after its peak
    const c = new Controller(null, 1000);
    await c.run(pm, "reset_peaks");
    expect(c.status).toBe(`peaks reset for pid ${pm.pid}`);
    expect({ peak: d.peakAllocated, reserved: d.peakReserved }).toEqual({ peak: d.allocated, reserved: d.reserved });
  });

  test("`d` on a live process writes one snapshot: the monitor's, with its trace, where the agent records no history", async () => {
    const pm = liveProcess(agents);
    const c = new Controller(null, 1000);
    c.snapshotDir = join(dir, "d-without-history");
    await c.run(pm, "dump_snapshot");
    const files = readdirSync(c.snapshotDir);
    expect(files).toEqual([expect.stringMatching(new RegExp(`^${pm.pid}-snapshot-\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\d(-\\d+)?\\.pickle$`))]);
    expect(c.status).toContain("the agent records no memory history");
    // As torch.cuda._memory_viz loads it (Python's pickle), with a trace that adds up to its
    // segments from the first entry, the walk memory_viz makes (test/snapshot/write.test.ts holds
    // this writer's files to memory_viz's opcodes and to torch's own tooling).
    const py = Bun.spawnSync(["python3", "-c", "import json, pickle, sys; s = pickle.load(open(sys.argv[1], 'rb')); print(json.dumps([s['segments'], s['device_traces']]))", join(c.snapshotDir, files[0]!)], { stdout: "pipe", stderr: "pipe" });
    expect(py.stderr.toString()).toBe("");
    const [segments, traces] = JSON.parse(py.stdout.toString()) as [SegmentOut[], TraceEntry[][]];
    expect(traces[0]!.length).toBeGreaterThan(0);
    expect(checkTrace(segments, traces[0]!)).toBe(0);
    expect(summarize(parseSnapshotBytes(readFileSync(join(c.snapshotDir, files[0]!)))).devices[0]!.allocated_bytes).toBe(pm.model.devices[0]!.allocated);
  });

  test("`d` where the agent records memory history: one snapshot, the agent's (torch's own, with its stacks)", async () => {
    expect((await ask(socket, "history", { enabled: true })).ok).toBe(true);
    const pm = liveProcess(agents);
    const c = new Controller(null, 1000);
    c.snapshotDir = join(dir, "d-with-history");
    mkdirSync(c.snapshotDir); // the agent writes into a directory that is there (the monitor's own, or --dump-dir)
    await c.run(pm, "dump_snapshot");
    expect(readdirSync(c.snapshotDir)).toEqual([expect.stringMatching(new RegExp(`^${pm.pid}-snapshot-\\d{4}-\\d\\d-\\d\\dT\\d\\d-\\d\\d-\\d\\d(-\\d+)?\\.pickle$`))]);
    expect(c.status).toContain("by its agent");
    expect((await ask(socket, "history", { enabled: false })).ok).toBe(true);
  });
});

test("a reply that does not follow the protocol is refused in one line, before anything reads it", async () => {
  const tensor = { address: 4096, size: 512, name: "w", category: "weights", shape: [128], dtype: "float32", device: 0 };
  const a = await answerOf("names", { ok: true, tensors: [tensor], skipped: 0, scan_ms: 1, scan: false, write_index: 3, step: 1 });
  expect(a).toEqual({ ok: false, error: expect.stringMatching(/^names: the agent's reply does not follow the protocol: tensors\.0\.category: [^\n]+$/) });
  expect(await answerOf("empty_cache", { ok: true, reserved_before: [1] })).toMatchObject({ ok: false, error: expect.stringContaining("reserved_after") });
  expect(await answerOf("lines", { ok: false, error: "lines: no answer from the agent within 5 s" })).toEqual({ ok: false, error: "lines: no answer from the agent within 5 s" });
});

/** The monitor's model of the one agent in `agents`, read from its ring as the session reads it. */
function liveProcess(agents: string): ProcessModel {
  const watcher = new AgentWatcher(agents);
  const models = new LiveModels();
  const found = watcher.refresh();
  expect(found.length).toBe(1);
  models.update(found, null, Date.now() * 1000);
  return models.byPid.get(found[0]!.pid)!;
}
