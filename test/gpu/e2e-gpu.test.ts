// `bun run e2e:gpu` on a machine that cannot run it: exit status 2, says which of GPU / torch /
// tmux is missing, starts nothing and writes no report.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gpuE2eTest, reportDir } from "../support/gpu";

const ROOT = join(import.meta.dir, "..", "..");
const SCRIPT = join(ROOT, "test", "gpu", "e2e-gpu.ts");
const BUN = process.execPath;

function hasGpu(): boolean {
  const p = Bun.spawnSync([BUN, join(ROOT, "src", "cli.ts"), "--json", "--once"], { stdout: "pipe", stderr: "pipe" });
  try {
    return JSON.parse(p.stdout.toString()).devices.length > 0;
  } catch {
    return false;
  }
}
const gpu = hasGpu();

function run(argv: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync(argv, { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

describe("bun run e2e:gpu refuses where it cannot run", () => {
  test("no torch (PYTHON names no interpreter): exit 2, says so, no report written", () => {
    const out = join(mkdtempSync(join(tmpdir(), "gpumem-e2e-test-")), "report");
    const r = run([BUN, SCRIPT, out], { PYTHON: "/nonexistent/python3" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("e2e:gpu: cannot run on this machine; nothing was started:");
    expect(r.stderr).toContain('no torch: no Python interpreter "/nonexistent/python3"');
    expect(existsSync(out)).toBe(false);
  });

  (gpu ? test.skip : test)(`no NVIDIA GPU, through the package script: exit 2 and NVML's reason${gpu ? " (this machine has a GPU)" : ""}`, () => {
    const out = join(mkdtempSync(join(tmpdir(), "gpumem-e2e-test-")), "report");
    const r = run([BUN, "run", "e2e:gpu", out]);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/ {2}- no NVIDIA GPU: .+ \(gpumem-tui --json --once\)/);
    expect(r.stderr).toContain("run it where there is an NVIDIA GPU, PyTorch with CUDA and tmux");
    expect(existsSync(out)).toBe(false);
  });

  test("no tmux on PATH: exit 2, says so", () => {
    const r = run([BUN, SCRIPT, join(tmpdir(), "gpumem-e2e-never")], { PATH: "/nonexistent", PYTHON: "/nonexistent/python3" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("  - no tmux: install it (apt install tmux)");
  });

  test("a stray argument is a usage error (exit 2); --help is not", () => {
    expect(run([BUN, SCRIPT, "a", "b"]).code).toBe(2);
    const h = run([BUN, SCRIPT, "--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("usage: bun run e2e:gpu [OUT_DIR]");
  });
});

// On a GPU machine (`bun run test:gpu`) the whole run: every check of its report passes.
gpuE2eTest("`bun run e2e:gpu` on this machine: every check passes (exit 0)", () => {
  const report = reportDir("e2e-gpu");
  try {
    const r = run([BUN, SCRIPT, report.dir]);
    expect({ code: r.code, tail: r.stdout.split("\n").slice(-8).join("\n") + r.stderr.slice(-2000) }).toMatchObject({ code: 0 });
  } finally {
    report.done();
  }
}, 600_000);
