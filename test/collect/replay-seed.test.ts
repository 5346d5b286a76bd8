// `replay` of an attach recording reads the attach's seed beside its ring, as the live monitor
// reads an agent's (collect/seed-file.ts): the H200 GPT-2 attached after its 73rd step, replayed
// from the committed files, has torch's blocks from before the attach, so its totals come from
// the blocks and equal torch's figures at its end. A seed that cannot be read is refused in one
// line and the replay goes on with the hook's totals, as without one.
import { afterAll, expect, test } from "bun:test";
import { copyFileSync, mkdtempSync, readFileSync, rmSync, truncateSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gunzipSync } from "node:zlib";
import { MAX_SEED_BYTES } from "../../src/profiler";

const CLI = `${import.meta.dir}/../../src/cli.ts`;
const EXACT = `${import.meta.dir}/../fixtures/exact`;
const facts = JSON.parse(readFileSync(join(EXACT, "attach-gpt2.facts.json"), "utf8"));
const manifest = JSON.parse(readFileSync(join(EXACT, "attach-gpt2.json"), "utf8"));
const dirs: string[] = [];
afterAll(() => dirs.forEach((d) => rmSync(d, { recursive: true, force: true })));

/** `replay FILE --json`: device 0 of the final state's summary, and what it said on stderr. */
function replayed(ring: string): { device: Record<string, unknown>; err: string[] } {
  const p = Bun.spawnSync(["bun", CLI, "replay", ring, "--json"], { stdout: "pipe", stderr: "pipe", timeout: 30_000 });
  expect(p.exitCode).toBe(0);
  const final = JSON.parse(p.stdout.toString().trimEnd().split("\n").pop()!);
  expect(final.type).toBe("final");
  return { device: final.summary.devices[0], err: p.stderr.toString().split("\n").filter(Boolean) };
}

/** The recording under the agent's own names in a fresh directory (`<pid>.ring`, `<pid>.json`,
 *  `<pid>.seed.json`, as GPUMEM_TUI_KEEP=1 leaves them), the ring unpacked; `seed` replaces the seed. */
function keptDir(seed?: (path: string) => void): string {
  const dir = mkdtempSync(join(tmpdir(), "gpumem-replay-seed-"));
  dirs.push(dir);
  const pid = manifest.pid as number;
  writeFileSync(join(dir, `${pid}.ring`), gunzipSync(readFileSync(join(EXACT, "attach-gpt2.ring.gz"))));
  copyFileSync(join(EXACT, "attach-gpt2.json"), join(dir, `${pid}.json`));
  copyFileSync(join(EXACT, "attach-gpt2.seed.json"), join(dir, `${pid}.seed.json`));
  seed?.(join(dir, `${pid}.seed.json`));
  return join(dir, `${pid}.ring`);
}

const exact = {
  totals_source: "blocks",
  partial_causes: [],
  allocated_bytes: facts.memory_allocated,
  active_bytes: facts.active,
  peak_allocated_bytes: facts.max_memory_allocated,
};

test("replay of the H200 attach recording applies its seed: totals from torch's blocks, equal to torch at the end", () => {
  const { device, err } = replayed(join(EXACT, "attach-gpt2.ring.gz"));
  expect(device).toMatchObject(exact);
  expect(device.allocated_events_bytes).toBe(facts.memory_allocated);
  expect(err).toEqual([]);
});

test("the agent's kept files (<pid>.ring beside <pid>.seed.json) replay the same", () => {
  const { device, err } = replayed(keptDir());
  expect(device).toMatchObject(exact);
  expect(err).toEqual([]);
});

test("a seed that is not JSON is refused in one line; the replay goes on with the hook's totals", () => {
  const ring = keptDir((seed) => writeFileSync(seed, `{"version": 1,`.padEnd(manifest.seed.bytes)));
  const { device, err } = replayed(ring);
  expect(err).toHaveLength(1);
  expect(err[0]).toMatch(/^gpumem-tui: seed refused: \S+\.seed\.json is not JSON: .*; the blocks from before the attach are not known and the totals are the hook's$/);
  expect(device.totals_source).toBe("hook");
  expect(device.allocated_bytes).toBe(facts.memory_allocated); // the hook's running total, still torch's here
});

test("a seed over MAX_SEED_BYTES is refused before it is read", () => {
  const ring = keptDir((seed) => truncateSync(seed, MAX_SEED_BYTES + 1)); // sparse: nothing to read
  const manifestPath = ring.replace(/\.ring$/, ".json");
  writeFileSync(manifestPath, JSON.stringify({ ...manifest, seed: { ...manifest.seed, bytes: MAX_SEED_BYTES + 1 } }));
  const { device, err } = replayed(ring);
  expect(err).toHaveLength(1);
  expect(err[0]).toContain(`is ${MAX_SEED_BYTES + 1} bytes: larger than any seed (${MAX_SEED_BYTES} bytes at most); refusing`);
  expect(device.totals_source).toBe("hook");
});

test("a seed of another size than the manifest's is not this recording's: refused", () => {
  const ring = keptDir((seed) => writeFileSync(seed, readFileSync(join(EXACT, "attach-gpt2.seed.json"), "utf8") + "\n"));
  const { device, err } = replayed(ring);
  expect(err).toHaveLength(1);
  expect(err[0]).toContain(`is ${manifest.seed.bytes + 1} bytes where the manifest's seed was ${manifest.seed.bytes}: not this recording's seed`);
  expect(device.totals_source).toBe("hook");
});

test("a manifest that names a seed with none beside the ring says so once", () => {
  const ring = keptDir((seed) => rmSync(seed));
  const { device, err } = replayed(ring);
  expect(err).toEqual([`gpumem-tui: no seed beside the ring (${ring.replace(/\.ring$/, ".seed.json")}; its manifest names ${manifest.seed.path}): the blocks from before the attach are not known and the totals are the hook's`]);
  expect(device.totals_source).toBe("hook");
});
