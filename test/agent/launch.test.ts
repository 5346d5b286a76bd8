// `gpumem-tui run -- python …`: the environment launchSpec builds (what `run` spawns), tried on a real python3 (no
// torch needed: the agent only attaches once the program imports torch).
import { expect, test } from "bun:test";
import { mkdtempSync, readdirSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { AGENT_ROOT, INJECT_DIR, launchSpec } from "../../src/launch";

const dir = mkdtempSync(join(tmpdir(), "gpumem-launch-"));
const agents = join(dir, "agents");
const userSite = join(dir, "user-site");
Bun.spawnSync(["mkdir", "-p", userSite]);
// The program's own sitecustomize: it must still run behind the agent's.
writeFileSync(join(userSite, "sitecustomize.py"), "import builtins\nbuiltins.USER_SITE_RAN = True\n");
const program = [
  "import sys, builtins",
  "data = sys.stdin.read()",
  "sys.stdout.write('out:' + data.upper())",
  "sys.stderr.write('err:' + str(getattr(builtins, 'USER_SITE_RAN', False)))",
  "sys.exit(7)",
].join("\n");

function run(env: Record<string, string | undefined>) {
  const spec = launchSpec(["python3", "-c", program, "arg"], env);
  const p = Bun.spawnSync(spec.argv, { env: spec.env, stdin: Buffer.from("hello\n"), stdout: "pipe", stderr: "pipe" });
  return { spec, code: p.exitCode, out: p.stdout.toString(), err: p.stderr.toString() };
}

test("run: the program's stdin, stdout, stderr and exit code pass through; its own sitecustomize still runs", () => {
  const r = run({ PATH: process.env.PATH, PYTHONPATH: userSite, GPUMEM_TUI_DIR: agents });
  expect(r.spec.env.PYTHONPATH).toBe(`${INJECT_DIR}:${AGENT_ROOT}:${userSite}`);
  expect(r.spec.argv).toEqual(["python3", "-c", program, "arg"]);
  expect([r.code, r.out, r.err]).toEqual([7, "out:HELLO\n", "err:True"]);
  // A program that never imports torch leaves nothing behind (no agent directory at all).
  expect(() => readdirSync(agents)).toThrow();
});

test("run: GPUMEM_TUI_DISABLE=1 leaves the environment as it was", () => {
  const r = run({ PATH: process.env.PATH, PYTHONPATH: userSite, GPUMEM_TUI_DISABLE: "1" });
  expect(r.spec.env.PYTHONPATH).toBe(userSite);
  expect([r.code, r.out, r.err]).toEqual([7, "out:HELLO\n", "err:True"]);
});

test("run: an empty command is refused with the usage", () => {
  expect(() => launchSpec([])).toThrow("run needs a program: gpumem-tui run -- python train.py");
});

test("run --json: the program learns where the line profiler's results go, beside the samples", () => {
  const out = join(dir, "train.ndjson");
  const cli = join(import.meta.dir, "..", "..", "src", "cli.ts");
  const py = "import os; print(os.environ.get('GPUMEM_PROFILE_JSON'))";
  const p = Bun.spawnSync([process.execPath, cli, "run", "--json", "--output", out, "--", "python3", "-c", py], {
    env: { ...process.env, GPUMEM_PROFILE_JSON: undefined, GPUMEM_TUI_DIR: agents },
    stdout: "pipe",
    stderr: "pipe",
  });
  expect(p.exitCode).toBe(0);
  expect(p.stdout.toString().trim()).toBe(join(dir, "train.lines.json"));
  // The samples file holds at least the last document, taken after the program exited.
  expect(Bun.file(out).size).toBeGreaterThan(0);
});
