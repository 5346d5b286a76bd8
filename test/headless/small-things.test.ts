// What a user trips on first, from the command line: the demo as documents and metrics where there
// is no GPU, the file checked before the terminal, one kind of message for a truncated gzip input.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { parseCli } from "../../src/commands/options";
import { DemoSampler } from "../../src/headless/demo";
import { startServer } from "../../src/headless/serve";
import { DocumentSchema } from "../../src/system/schema";
import { DEMO_RING, readTrack } from "../../src/collect/demo";

const CLI = join(import.meta.dir, "..", "..", "src", "cli.ts");
const cli = (...args: string[]) => Bun.spawnSync([process.execPath, CLI, ...args], { stdout: "pipe", stderr: "pipe", stdin: "ignore" });
const dir = mkdtempSync(join(tmpdir(), "gpumem-small-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const track = readTrack(DEMO_RING)!;

describe("--demo without the screens: the demo's recorded machine as the document", () => {
  test("--json --once --demo: one document of the recorded GPU and process, at the recording's end, with the model's profile", () => {
    const p = cli("--json", "--once", "--demo");
    expect(p.stderr.toString()).toBe("");
    expect(p.exitCode).toBe(0);
    const doc = DocumentSchema.parse(JSON.parse(p.stdout.toString()));
    expect(doc.reason).toBeNull();
    expect(doc.host).toBe(track.header.host);
    expect(doc.devices.map((d) => [d.name, d.recorded])).toEqual(track.samples.at(-1)!.devices.map((d) => [d.name, true]));
    const proc = doc.processes.find((x) => x.pytorch)!;
    expect(proc.agent_pid).toBe(track.header.pid);
    expect(proc.pytorch!.profile).not.toBeNull();
    expect(proc.pytorch!.step).toBe(proc.pytorch!.profile!.step);
  });

  test("--json --demo: a stream of documents, the replay moving on", async () => {
    const p = Bun.spawn([process.execPath, CLI, "--json", "--demo", "--interval", "300", "--speed", "20"], { stdout: "pipe", stderr: "pipe" });
    const reader = p.stdout.getReader();
    let out = "";
    while (out.split("\n").length < 4) {
      const { done, value } = await reader.read();
      if (done) break;
      out += new TextDecoder().decode(value);
    }
    p.kill();
    await p.exited;
    const docs = out.trim().split("\n").slice(0, 3).map((l) => DocumentSchema.parse(JSON.parse(l)));
    expect(docs).toHaveLength(3);
    for (const d of docs) expect(d.devices[0]!.recorded).toBe(true);
    expect(docs[2]!.time_unix_ms).toBeGreaterThan(docs[0]!.time_unix_ms);
  }, 20_000);

  test("serve --demo: accepted, and the page has dcgm-exporter's GPU series, ours, and NVML up", async () => {
    expect(parseCli(["serve", "--demo"]).demo).toBe(true);
    expect(() => parseCli(["schema", "--demo"])).toThrow("--demo goes with the monitor, --json or serve");
    const demo = new DemoSampler({ speed: 50 });
    const server = startServer(demo, { port: 0, hostname: "127.0.0.1", minIntervalMs: 0 });
    try {
      // Polled until the demo's process is on the page (it was 500 ms of sleep, short on a loaded machine).
      let page = "";
      for (let i = 0; i < 200 && !/gpumem_pytorch_allocated_bytes\{/.test(page); i++) {
        if (i) await Bun.sleep(50);
        page = await (await fetch(`http://127.0.0.1:${server.port}/metrics`)).text();
      }
      expect(page).toContain(`DCGM_FI_DEV_FB_USED{gpu="0",UUID="${track.samples[0]!.devices[0]!.uuid}"`);
      expect(page).toMatch(/gpumem_pytorch_allocated_bytes\{[^}]*pid="\d+"[^}]*\} \d+\n/);
      expect(page).toContain(`gpumem_nvml_up{hostname="${track.header.host}"} 1\n`);
    } finally {
      server.stop(true);
      demo.close();
    }
  });
});

describe("files named on the command line", () => {
  test("without a terminal, a file that is not there is said so (not that the screens need a terminal)", () => {
    for (const args of [["view", join(dir, "nonexistent.pickle")], ["replay", join(dir, "nonexistent.ring")]]) {
      const p = cli(...args);
      expect(p.stderr.toString()).toBe(`gpumem-tui: ${args[1]}: no such file\n`);
      expect(p.exitCode).toBe(1);
    }
    // A file that is there still gets the terminal's answer.
    expect(cli("view", join(import.meta.dir, "..", "fixtures", "normal-history.pickle")).stderr.toString()).toContain("the screens need a terminal");
  });

  test("a truncated .ring.gz and a truncated .pickle.gz get the same message", () => {
    const ring = join(dir, "cut.ring.gz");
    const pickle = join(dir, "cut.pickle.gz");
    writeFileSync(ring, readFileSync(DEMO_RING).subarray(0, 20_000));
    writeFileSync(pickle, readFileSync(join(import.meta.dir, "..", "fixtures", "snapshots", "leak.pickle.gz")).subarray(0, 20_000));
    const said = [cli("replay", ring, "--json"), cli("view", pickle, "--json"), cli("replay", pickle, "--json")].map((p) => {
      expect(p.exitCode).toBe(1);
      return p.stderr.toString().trim().split("\n");
    });
    for (const lines of said) expect(lines).toHaveLength(1);
    const words = said.map(([l]) => l!.replace(/^gpumem-tui: \S+: /, ""));
    expect(words[0]).toStartWith("truncated: ");
    expect(new Set(words).size).toBe(1);
  });
});
