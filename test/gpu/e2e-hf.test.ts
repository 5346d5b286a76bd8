// test/gpu/e2e-hf.ts on a machine that cannot run it: exit status 2, says what is missing (GPUs,
// torch, transformers, tmux), starts nothing and writes no report.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gpuE2eTest, reportDir } from "../support/gpu";

const ROOT = join(import.meta.dir, "..", "..");
const SCRIPT = join(ROOT, "test", "gpu", "e2e-hf.ts");
const BUN = process.execPath;

function run(argv: string[], env: Record<string, string> = {}) {
  const p = Bun.spawnSync(argv, { cwd: ROOT, env: { ...process.env, ...env }, stdout: "pipe", stderr: "pipe" });
  return { code: p.exitCode, stdout: p.stdout.toString(), stderr: p.stderr.toString() };
}

describe("test/gpu/e2e-hf.ts refuses where it cannot run", () => {
  test("no torch (PYTHON names no interpreter): exit 2, says so, no report written", () => {
    const dir = mkdtempSync(join(tmpdir(), "gpumem-e2e-hf-test-"));
    const out = join(dir, "report");
    try {
      const r = run([BUN, SCRIPT, out], { PYTHON: "/nonexistent/python3" });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain("e2e:hf: cannot run on this machine; nothing was started:");
      expect(r.stderr).toContain('no torch: no Python interpreter "/nonexistent/python3"');
      expect(existsSync(out)).toBe(false);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("no tmux on PATH: exit 2, says so", () => {
    const r = run([BUN, SCRIPT, join(tmpdir(), "gpumem-e2e-hf-never")], { PATH: "/nonexistent", PYTHON: "/nonexistent/python3" });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("  - no tmux: install it (apt install tmux)");
  });

  test("OUT_DIR is required, a second argument is a usage error (exit 2); --help is not", () => {
    expect(run([BUN, SCRIPT]).code).toBe(2);
    expect(run([BUN, SCRIPT, "a", "b"]).code).toBe(2);
    const h = run([BUN, SCRIPT, "--help"]);
    expect(h.code).toBe(0);
    expect(h.stdout).toContain("usage: bun test/gpu/e2e-hf.ts OUT_DIR");
  });
});

// On a GPU machine (`bun run test:gpu`) the whole run: every check of its report passes.
gpuE2eTest("test/gpu/e2e-hf.ts on this machine: every check passes (exit 0)", () => {
  const report = reportDir("e2e-hf");
  try {
    const r = run([BUN, SCRIPT, report.dir]);
    expect({ code: r.code, tail: r.stdout.split("\n").slice(-8).join("\n") + r.stderr.slice(-2000) }).toMatchObject({ code: 0 });
  } finally {
    report.done();
  }
}, 600_000);
