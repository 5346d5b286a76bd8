// The agent's torch-free parts, in Python's own unittest, started by `bun test` so that one
// command runs every test; and the Python view of the ring layout held to the C compiler's.
import { expect, test } from "bun:test";
import { join } from "node:path";
import { ROOT } from "../../src/ffi/build";
import { buildTool } from "../support/native";

test("agent: control protocol, uid checks, private files, ring copies (python3 -m unittest)", () => {
  const p = Bun.spawnSync(["python3", join(import.meta.dir, "test_control.py"), "-v"], { stdout: "pipe", stderr: "pipe" });
  const log = p.stderr.toString();
  if (p.exitCode !== 0) console.log(log);
  expect(p.exitCode).toBe(0);
  expect(log).toMatch(/Ran \d+ tests/);
  expect(log).toContain("OK");
});

test("agent: gpumem_agent/ring.py uses the offsets of gpumem_ring.h", () => {
  const c = JSON.parse(Bun.spawnSync([buildTool("layout")]).stdout.toString());
  const py = Bun.spawnSync(
    ["python3", "-c", "import json, gpumem_agent.ring as r; print(json.dumps(dict(r.OFF, header_size_const=r.HEADER_SIZE, record_size_const=r.RECORD_SIZE, record=r.RECORD.size, abi=r.ABI_VERSION, totals_size=r.TOTALS_SIZE, n_retries=8 * r.TOTALS.index('n_retries'), requested=8 * r.TOTALS.index('requested'))))"],
    { env: { ...process.env, PYTHONPATH: join(ROOT, "agent") } },
  );
  const o = JSON.parse(py.stdout.toString());
  for (const k of ["write_index", "totals", "pid", "mode", "attach_ns", "updated_ns", "cur_step", "cur_range", "cur_phase", "closed", "n_devices", "capacity", "totals_size", "n_retries", "requested"]) {
    expect({ k, v: o[k] }).toEqual({ k, v: c[k] });
  }
  expect([o.abi, o.header_size_const, o.record_size_const, o.record]).toEqual([c.abi, c.header_size, c.record_size, c.record_size]);
});
