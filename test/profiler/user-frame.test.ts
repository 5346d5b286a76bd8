// The user frame: the first frame of a stack (innermost first) outside torch, Python's library,
// site-packages and native code. Checked on the frames of real snapshots taken on an H100
// (test/fixtures/snapshots, recorded by capture_snapshots.py, whose own lines are the only code of
// the user's in them), and on the paths a user's machine has.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { frameKind, parseRuleEntries, userFrameIndex, type Frame } from "../../src/profiler/user-frame";
import { unpickle } from "../../src/snapshot/pickle";

const DIR = join(import.meta.dir, "..", "fixtures", "snapshots");
const SCRIPT = readFileSync(join(DIR, "capture_snapshots.py"), "utf8").split("\n");
/** The line of capture_snapshots.py that holds `code` (1-based), as the file says. */
const lineOf = (code: string) => SCRIPT.findIndex((l) => l.includes(code)) + 1;

type Entry = { action: string; frames?: { filename: string; line: number; name: string }[] };
function entries(name: string): Frame[][] {
  const root = unpickle(gunzipSync(readFileSync(join(DIR, `${name}.pickle.gz`)))) as { device_traces: Entry[][] };
  return root.device_traces[0]!.filter((e) => e.action === "alloc").map((e) => (e.frames ?? []).map((f) => ({ file: f.filename, line: f.line, name: f.name })));
}
const isScript = (f: Frame) => f.file.endsWith("/capture_snapshots.py");

describe("the user frame of real stacks", () => {
  for (const name of ["stacks-python", "stacks-all", "leak"]) {
    test(`${name}: every alloc's user frame is its innermost frame of the capture script, or none`, () => {
      const all = entries(name);
      let withScript = 0;
      for (const frames of all) {
        const expected = frames.findIndex(isScript);
        if (expected >= 0) withScript++;
        expect(userFrameIndex(frames)).toBe(expected);
      }
      expect(withScript).toBeGreaterThan(all.length / 3);
    });
  }

  test("a module's forward allocates at `out = model(...)`, AdamW at `opt.step()`, the batch at `torch.randint`", () => {
    const where = (frames: Frame[]) => frames[userFrameIndex(frames)];
    const all = entries("stacks-all");
    const forward = all.filter((f) => f.some((x) => x.file.endsWith("torch/nn/modules/module.py")) && !f.some((x) => x.file.includes("torch/optim/")));
    const optimizer = all.filter((f) => f.some((x) => x.file.endsWith("torch/optim/adam.py")));
    expect(forward.length).toBeGreaterThan(100);
    expect(optimizer.length).toBeGreaterThan(10);
    for (const f of forward) expect({ line: where(f)!.line, name: where(f)!.name }).toEqual({ line: lineOf("out = model(input_ids=x, labels=x)"), name: "step" });
    for (const f of optimizer) expect(where(f)!.line).toBe(lineOf("opt.step()"));
    expect(all.some((f) => where(f)?.line === lineOf("x = torch.randint("))).toBe(true);
    // stacks="all": the C++ frames come first, dozens of them; none is ever the user's
    expect(forward.every((f) => frameKind(f[0]!.file) === "native")).toBe(true);
  });

  test("a package of the user's (GPUMEM_TUI_USER_CODE) is their code even under site-packages; more library code (GPUMEM_TUI_LIBRARY) is skipped", () => {
    const logits = entries("leak").filter((f) => f.some((x) => x.file.endsWith("torch/nn/modules/linear.py")) && f.some(isScript));
    expect(logits.length).toBeGreaterThan(0);
    for (const f of logits) {
      const k = userFrameIndex(f, { library: [], user: ["transformers"] });
      expect(f[k]!.file).toContain("/site-packages/transformers/");
      expect(f.slice(0, k).every((x) => !x.file.includes("/transformers/"))).toBe(true);
      // the script itself named as library code (by module, or by its directory): no user frame
      expect(userFrameIndex(f, { library: ["capture_snapshots"], user: [] })).toBe(-1);
      const dir = f.find(isScript)!.file.replace(/capture_snapshots\.py$/, "");
      expect(userFrameIndex(f, { library: [dir], user: [] })).toBe(-1);
    }
  });
});

describe("what is library code", () => {
  test.each([
    ["/usr/lib/python3.12/threading.py", "library"],
    ["/root/.pyenv/versions/3.11.9/lib/python3.11/runpy.py", "library"],
    ["/opt/conda/lib/python3.10/site-packages/accelerate/accelerator.py", "library"],
    ["/usr/lib/python3/dist-packages/numpy/core/numeric.py", "library"],
    ["/usr/local/lib64/python3.13t/contextlib.py", "library"],
    ["<frozen runpy>", "library"],
    ["/home/me/src/pytorch/torch/nn/modules/module.py", "library"],
    ["/home/me/src/pytorch/torch/_tensor.py", "library"],
    ["C:\\Python312\\Lib\\threading.py", "library"],
    ["C:\\venv\\Lib\\site-packages\\torch\\autograd\\__init__.py", "library"],
    ["/home/me/project/train.py", "user"],
    ["/home/me/torch-experiments/train.py", "user"],
    ["C:\\work\\train.py", "user"],
    ["<string>", "user"],
    ["<ipython-input-3-1a2b>", "user"],
    ["??", "native"],
    ["", "native"],
    ["CUDACachingAllocator.cpp", "native"],
  ])("%s is %s", (file, kind) => {
    expect(frameKind(file)).toBe(kind as ReturnType<typeof frameKind>);
  });

  test("a rule's entries: path prefixes and module names, separated by : or ,; anything else is said", () => {
    expect(parseRuleEntries("accelerate:my_pkg.sub, /opt/shared/ ,", "GPUMEM_TUI_LIBRARY")).toEqual(["accelerate", "my_pkg.sub", "/opt/shared/"]);
    expect(() => parseRuleEntries("my pkg", "GPUMEM_TUI_LIBRARY")).toThrow('GPUMEM_TUI_LIBRARY: "my pkg" is neither a path prefix (with a "/") nor a module name (like accelerate or my_pkg.sub)');
    expect(frameKind("/opt/shared/lib/wrap.py", { library: ["/opt/shared/"], user: [] })).toBe("library");
    expect(frameKind("/srv/venv/lib/python3.12/site-packages/my_pkg/sub/train.py", { library: [], user: ["my_pkg.sub"] })).toBe("user");
    expect(frameKind("/srv/venv/lib/python3.12/site-packages/my_pkg/other.py", { library: [], user: ["my_pkg.sub"] })).toBe("library");
  });
});
