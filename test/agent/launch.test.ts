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

// The agent attaches when torch executes, even where the program first only asked whether torch is
// there: transformers' is_torch_available() and many dependency checks call
// importlib.util.find_spec("torch") before any import (a compiled GPT-2 run on an H200 ran without
// its agent this way). No torch on this machine: a package named torch in a folder of its own
// stands in for it; it offers what gpumem_agent.attach() asks of torch before CUDA starts.
test("run: a find_spec('torch') probe before the import still leaves the agent attached when torch executes", () => {
  const fake = join(dir, "fake-torch");
  Bun.spawnSync(["mkdir", "-p", join(fake, "torch")]);
  writeFileSync(
    join(fake, "torch", "__init__.py"),
    ["class cuda:", "    queued = []", "    is_initialized = staticmethod(lambda: False)", "    _lazy_call = staticmethod(queued.append)", ""].join("\n"),
  );
  const probe = (first: string) =>
    [
      "import importlib.util, sys",
      first,
      "import torch",
      "a = sys.modules.get('gpumem_agent')",
      "print(a is not None and a.current() is not None, len(torch.cuda.queued), [type(f).__name__ for f in sys.meta_path].count('_AttachAfterTorch'))",
    ].join("\n");
  for (const [first, want] of <[string, string][]>[
    ["pass", "True 1 0"],
    ["assert importlib.util.find_spec('torch') is not None", "True 1 0"],
    ["importlib.util.find_spec('torch'); importlib.util.find_spec('torch')", "True 1 0"],
  ]) {
    const spec = launchSpec(["python3", "-c", probe(first)], { PATH: process.env.PATH, PYTHONPATH: fake, GPUMEM_TUI_DIR: agents, GPUMEM_TUI_POLLING: "1" });
    const p = Bun.spawnSync(spec.argv, { env: spec.env, stdout: "pipe", stderr: "pipe" });
    expect([first, p.exitCode, p.stdout.toString().trim(), p.stderr.toString()]).toEqual([first, 0, want, ""]);
  }
});
