// The agent's torch-free parts, in Python's own unittest, started by `bun test` so that one
// command runs every test. (Its view of the ring layout, wire.py: test/ffi/wire.test.ts.)
import { expect, test } from "bun:test";
import { existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import { torchPython } from "../support/torch";
import { expectUnittestPasses } from "../support/unittest";

test("agent: control protocol, uid checks, private files, ring copies (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_control.py"));
});

test("agent: the ring's lanes, merged by time and compacted to one (python3 -m unittest)", () => {
  expectUnittestPasses(join(import.meta.dir, "test_ring_lanes.py"), { count: 2 });
});

// The line profiler follows lines through sys.monitoring on Python 3.12+ and a trace function
// before: the machine's python3 runs the tests, and one Python 3.12+ where one is installed (on
// PATH, or pyenv's), so both ways are tested.
function version(py: string): string | null {
  const p = Bun.spawnSync([py, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], { env: process.env, stdout: "pipe", stderr: "pipe" });
  return p.exitCode === 0 ? p.stdout.toString().trim() : null;
}
const pyenv = join(process.env.PYENV_ROOT ?? join(process.env.HOME ?? "/root", ".pyenv"), "versions");
const candidates = [
  "python3",
  "python3.13",
  "python3.12",
  ...(existsSync(pyenv) ? new Bun.Glob("*/bin/python3").scanSync({ cwd: pyenv, absolute: true, onlyFiles: false }) : []),
];
const byVersion = new Map<string, string>();
for (const c of candidates) {
  const path = c.startsWith("/") ? c : Bun.which(c);
  const v = path ? version(path) : null;
  if (path && v && !byVersion.has(v)) byVersion.set(v, path);
}
const minor = (v: string) => Number(v.split(".")[1]);
const system = version("python3");
const modern = [...byVersion.keys()].filter((v) => v.startsWith("3.") && minor(v) >= 12).sort((a, b) => minor(b) - minor(a))[0];
for (const v of [system, modern]) {
  if (!v) continue;
  const how = minor(v) >= 12 ? "sys.monitoring" : "a trace function";
  test(`agent: the line profiler splits the allocator's records between lines (Python ${v}: ${how})`, () => {
    const p = Bun.spawnSync([byVersion.get(v)!, join(import.meta.dir, "test_lines.py"), "-v"], { env: process.env, stdout: "pipe", stderr: "pipe" });
    const log = p.stderr.toString();
    if (p.exitCode !== 0) console.log(log);
    expect(p.exitCode).toBe(0);
    expect(log).toContain("OK");
  });
  if (v === modern) break;
}
if (!modern) test.skip("agent: the line profiler through sys.monitoring (needs a Python 3.12+: none found on PATH or in pyenv)", () => {});

// The agent's Python API where torch has no CUDA (a laptop, a CPU build): nothing breaks, each
// call says once why it cannot profile (a CPU build of torch is what this test is about).
const torchPy = torchPython();
const cpuOnly = torchPy && Bun.spawnSync([torchPy, "-c", "import torch, sys; sys.exit(0 if not torch.cuda.is_available() else 1)"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0;
(cpuOnly ? test : test.skip)(
  `agent: without CUDA, profile() runs the function and says why once; report() says there are no CUDA tensors${cpuOnly ? "" : " (needs a Python with a torch that has no CUDA: GPUMEM_TORCH_PYTHON=...)"}`,
  () => {
    const p = Bun.spawnSync(
      [torchPy!, "-c", `import torch, gpumem_agent, io
@gpumem_agent.profile
def f(n):
    return torch.ones(n).sum().item()
print(f(10), f(20))
buf = io.StringIO()
print(len(gpumem_agent.report(file=buf)), buf.getvalue().splitlines()[0])
print(gpumem_agent.profile_stats()[0]["profiled_calls"])`],
      { env: { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TUI_DIR: join(tmpdir(), `gpumem-nocuda-${process.pid}`) }, stdout: "pipe", stderr: "pipe" },
    );
    expect(p.exitCode).toBe(0);
    expect(p.stdout.toString().trim().split("\n")).toEqual(["10.0 20.0", "0 no live CUDA tensors", "0"]);
    const warnings = p.stderr.toString().split("\n").filter((l) => l.startsWith("gpumem_agent.profile:"));
    expect(warnings).toEqual(["gpumem_agent.profile: CUDA could not start: Torch not compiled with CUDA enabled"]);
  },
  60_000,
);
