// What the agent trusts (issue 35): the hook's build and its key, planted modules under `run`,
// `python -I`/`-E`, setuid and setgid (test_trust.py, Python's unittest); and attach into a real
// python3 whose script's directory and working directory hold planted json.py, struct.py, ...:
// the bootstrap and the agent import none of them.
import { expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { PAYLOAD_ENV } from "../../src/attach/bootstrap";
import { attach, testEnv } from "../attach/support";
import { unittestPasses } from "../support/unittest";

// The two share nothing (each its own folders and processes): concurrent.
test.concurrent("agent: the hook's build searches only trusted directories, keyed by them; planted modules, -I/-E, setuid (python3 -m unittest)", async () => {
  await unittestPasses(join(import.meta.dir, "test_trust.py"));
}, 120_000);

// Imports only built-in modules (sys, time): whatever of the standard library the bootstrap and the
// agent need, the program has not loaded, so a planted one would be found first.
const SLEEPER = `import sys, time
sys.stderr.write("ready\\n")
sys.stderr.flush()
for _ in range(300):
    time.sleep(0.01)
print("done")
`;
const PLANTED = ["json", "struct", "secrets", "tempfile", "selectors", "socket", "pickle", "ctypes", "threading", "importlib", "hashlib", "weakref"];

test.concurrent("attach: modules planted beside the target's script and in its working directory do not run", async () => {
  const python = existsSync("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
  const scriptDir = mkdtempSync(join(tmpdir(), "gpumem-planted-"));
  const cwd = mkdtempSync(join(tmpdir(), "gpumem-planted-cwd-"));
  const marker = join(scriptDir, "planted-ran");
  for (const dir of [scriptDir, cwd])
    for (const name of PLANTED) writeFileSync(join(dir, `${name}.py`), `with open(${JSON.stringify(marker)}, "a") as f:\n    f.write(__name__ + " from " + __file__ + "\\n")\n`);
  const script = join(scriptDir, "train.py");
  writeFileSync(script, SLEEPER);
  // The real agent, not the probe payload: it loads, finds no torch, and says so.
  const { [PAYLOAD_ENV]: _probe, ...env } = testEnv();
  const proc = Bun.spawn([python, script], { cwd, stdout: "pipe", stderr: "pipe" });
  const reader = proc.stderr.getReader();
  let said = "";
  while (!said.includes("ready\n")) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the target ended before it was ready: ${said}`);
    said += new TextDecoder().decode(value);
  }
  reader.releaseLock();
  const r = await attach(proc.pid, env);
  expect(r.line).toBe(`attach ${proc.pid}: the agent did not start: torch is not imported in this process`);
  expect(await new Response(proc.stdout).text()).toBe("done\n");
  expect(await proc.exited).toBe(0);
  expect(existsSync(marker) ? readFileSync(marker, "utf8") : "").toBe("");
}, 30_000);
