// Reading a snapshot piece by piece: any cut of the file into chunks reads the same, the trace goes
// to columns and leaves the tree, every pickle protocol PyTorch's Python may write (2 to 5) and gzip
// read the same, and bad files end in one clear error that names the file.
import { describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { FrameHints, HINT_BACKWARD, HINT_FORWARD, HINT_NO_FRAMES, HINT_NONE, HINT_OPTIMIZER, HINT_SETUP } from "../../src/snapshot/frames";
import { pickleMachine, SnapshotError, unpickle } from "../../src/snapshot/pickle";
import { parseSnapshotBytes, readSnapshotFile } from "../../src/snapshot/read";
import { summarize } from "../../src/snapshot/summary";
import { TraceColumns } from "../../src/snapshot/trace-columns";

const FIX = join(import.meta.dir, "..", "fixtures");
const data = new Uint8Array(readFileSync(join(FIX, "normal-history.pickle")));
const dir = mkdtempSync(join(tmpdir(), "gpumem-stream-"));

function python(code: string, input?: Uint8Array): string {
  const p = Bun.spawnSync(["python3", "-c", code], { stdin: input ? Buffer.from(input) : undefined, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(p.stderr.toString());
  return p.stdout.toString();
}

function columns(t: TraceColumns) {
  const n = t.count;
  return [...t.action.subarray(0, n)].map((a, i) => [a, t.device[i], t.address[i], t.size[i], t.time_us[i], t.hint[i]]);
}

describe("the pickle machine fed in chunks", () => {
  test("any cut into chunks (1 to 700 bytes) reads what one piece reads, tree and columns", () => {
    const whole = unpickle(data);
    let seed = 7;
    const rand = () => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) / 2 ** 32);
    for (const max of [1, 13, 700]) {
      const m = pickleMachine();
      let v;
      for (let at = 0; at < data.length; ) {
        const n = 1 + Math.floor(rand() * max);
        v = m.feed(data.slice(at, at + n), at + n >= data.length);
        at += n;
      }
      expect(v).toEqual(whole);
      const t = new TraceColumns();
      const mt = pickleMachine(undefined, t);
      let root;
      for (let at = 0; at < data.length; at += 4096) root = mt.feed(data.slice(at, at + 4096), at + 4096 >= data.length);
      t.assignDevices((root as { device_traces: unknown }).device_traces);
      expect(columns(t)).toEqual(columns(parseSnapshotBytes(data).trace));
    }
  });

  test("trace entries go to columns and leave the tree; everything else stays as Python reads it", () => {
    const p = parseSnapshotBytes(data);
    const py = JSON.parse(python("import sys,pickle,json; d=pickle.load(sys.stdin.buffer); t=d['device_traces'][0]; print(json.dumps({'n':len(t),'first':[t[0]['addr'],t[0]['size'],t[0]['time_us']],'segments':d['segments']}))", data));
    expect(p.trace.count).toBe(py.n);
    expect((p.root.device_traces as unknown[][])[0]).toEqual([]);
    expect([p.trace.address[0], p.trace.size[0], p.trace.time_us[0]]).toEqual(py.first);
    expect(p.root.segments).toEqual(py.segments);
  });

  test("pickle protocols 2 to 5 and gzip read the same", () => {
    const want = summarize(parseSnapshotBytes(data));
    for (const proto of [2, 3, 4, 5]) {
      const bytes = new Uint8Array(Buffer.from(python(`import sys,pickle; sys.stdout.write(pickle.dumps(pickle.load(sys.stdin.buffer), protocol=${proto}).hex())`, data), "hex"));
      expect(summarize(parseSnapshotBytes(bytes))).toEqual(want);
    }
    expect(summarize(parseSnapshotBytes(Bun.gzipSync(data)))).toEqual(want);
  });

  test("a trace entry named again after it was read is refused, in words", () => {
    // [ {action: alloc}, <memo 1 again> ]: one dict in two places, which no snapshot has
    const bad = new Uint8Array(Buffer.from(python("import pickle,sys; e={'action':'alloc','addr':512,'size':512}; sys.stdout.write(pickle.dumps({'segments':[],'device_traces':[[e],[e]]}, protocol=4).hex())"), "hex"));
    expect(() => parseSnapshotBytes(bad)).toThrow(/memo \d+ is a trace entry, read again after it was taken/);
  });
});

describe("reading a file", () => {
  test("plain and gzip files read the same, with progress up to the file's size", async () => {
    const plain = join(dir, "a.pickle");
    const gz = join(dir, "a.pickle.gz");
    writeFileSync(plain, data);
    writeFileSync(gz, Bun.gzipSync(data));
    const seen: number[] = [];
    const a = await readSnapshotFile(plain, (done, total) => (expect(total).toBe(data.length), seen.push(done)));
    const b = await readSnapshotFile(gz);
    expect(summarize(a)).toEqual(summarize(b));
    expect(seen.at(-1)).toBe(data.length);
    expect([...seen].sort((x, y) => x - y)).toEqual(seen);
  });

  test("truncated, corrupt gzip, empty: one error that names the file", async () => {
    const cases: [string, Uint8Array, RegExp][] = [
      ["cut.pickle", data.subarray(0, 100_000), /cut\.pickle: not a readable snapshot pickle: truncated/],
      ["cut.pickle.gz", Bun.gzipSync(data).subarray(0, 7_000), /cut\.pickle\.gz: truncated: a gzip file that ends before its compressed data does/],
      ["trailer.pickle.gz", Bun.gzipSync(data).subarray(0, Bun.gzipSync(data).length - 4), /trailer\.pickle\.gz: truncated: a gzip file that ends before its compressed data does/],
      ["empty.pickle", new Uint8Array(0), /empty\.pickle: not a PyTorch memory snapshot: not a pickle/],
      ["text.pickle", new TextEncoder().encode("hello"), /text\.pickle: not a PyTorch memory snapshot: not a pickle/],
    ];
    for (const [name, bytes, message] of cases) {
      writeFileSync(join(dir, name), bytes);
      const e = await readSnapshotFile(join(dir, name)).catch((x) => x);
      expect(e).toBeInstanceOf(SnapshotError);
      expect(e.message).toMatch(message);
      expect(e.message.split("\n")).toHaveLength(1);
    }
  });
});

describe("what frames say", () => {
  const f = (filename: string, name: string) => ({ filename, name, line: 1 });
  const site = "/venv/lib/python3.12/site-packages/torch/";
  test.each([
    ["a module's forward", [f(`${site}nn/functional.py`, "linear"), f(`${site}nn/modules/module.py`, "_call_impl")], HINT_FORWARD],
    ["loss.backward() on the main thread", [f(`${site}autograd/__init__.py`, "_make_grads"), f(`${site}_tensor.py`, "backward")], HINT_BACKWARD],
    ["C++ autograd (stacks='all')", [f("??", "torch::autograd::Engine::evaluate_function"), f(`${site}nn/modules/module.py`, "_call_impl")], HINT_BACKWARD],
    ["AdamW's step", [f(`${site}optim/adam.py`, "_multi_tensor_adam"), f(`${site}optim/optimizer.py`, "wrapper")], HINT_OPTIMIZER],
    ["model.to(device)", [f(`${site}nn/modules/module.py`, "convert"), f(`${site}nn/modules/module.py`, "_apply")], HINT_SETUP],
    ["the user's own code", [f("/home/u/train.py", "main")], HINT_NONE],
    ["autograd's engine thread (no Python)", [], HINT_NO_FRAMES],
  ] as const)("%s", (_what, frames, hint) => {
    expect(new FrameHints().of(frames)).toBe(hint);
  });
});
