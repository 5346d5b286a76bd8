// Prometheus metrics: checked by Prometheus's own tools (promtool's exposition parser, and a real
// Prometheus server scraping `gpumem-tui serve`) on documents recorded on an H100.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { exposition } from "../../src/headless/prometheus";
import type { Document } from "../../src/system/schema";
import { startServer } from "../../src/headless/serve";
import { hostDocument, TORCHRUN } from "../support/jobs";
import { SCHEMA_VERSION } from "../../src/system/version";
import pkg from "../../package.json";

const FIXTURES = join(import.meta.dir, "..", "fixtures");
const documents: [string, Document][] = readdirSync(FIXTURES)
  .filter((f) => /^h100-.*\.json$/.test(f))
  .map((f) => [f, JSON.parse(readFileSync(join(FIXTURES, f), "utf8"))]);
const promtool = Bun.which("promtool");
const prometheus = Bun.which("prometheus");
const SKIP = "(needs Prometheus: `apt install prometheus`; .ci/run installs it)";

describe("exposition", () => {
  test("recorded H100 documents are present", () => expect(documents.length).toBeGreaterThan(0));

  for (const [name, doc] of documents) {
    test(`${name}: dcgm-exporter's names and units for NVML figures, ours for the rest`, () => {
      const text = exposition(doc);
      const d = doc.devices[0]!;
      const MiB = 1024 * 1024;
      expect(text).toContain(`# TYPE DCGM_FI_DEV_FB_USED gauge`);
      expect(text).toMatch(new RegExp(`DCGM_FI_DEV_FB_USED\\{gpu="0",UUID="${d.uuid}",device="nvidia0",modelName="${d.name}",[^}]*\\} ${Math.round(d.memory_used_bytes! / MiB)}\\n`));
      expect(text).toMatch(new RegExp(`DCGM_FI_DEV_POWER_USAGE\\{[^}]*\\} ${d.power_draw_milliwatts! / 1000}\\n`));
      expect(text).toMatch(new RegExp(`gpumem_gpu_memory_total_bytes\\{[^}]*\\} ${d.memory_total_bytes}\\n`));
      // A field the device does not report is absent, not 0 (the H100 has no fan).
      if (d.fan_speed_percent === null) expect(text).not.toContain("DCGM_FI_DEV_FAN_SPEED");
      for (const p of doc.processes.filter((x) => x.pytorch)) {
        expect(text).toMatch(new RegExp(`gpumem_pytorch_reserved_bytes\\{[^}]*pid="${p.pid}"[^}]*\\} ${p.pytorch!.reserved_bytes}\\n`));
        expect(text).toContain("# TYPE gpumem_pytorch_ooms_total counter");
      }
    });

    (promtool ? test : test.skip)(`${name}: promtool's parser accepts the exposition ${promtool ? "" : SKIP}`, () => {
      const p = Bun.spawnSync([promtool!, "check", "metrics"], { stdin: Buffer.from(exposition(doc)), stderr: "pipe", stdout: "pipe" });
      // The only remark allowed: dcgm-exporter's own camelCase labels, kept for compatibility.
      const remarks = (p.stderr.toString() + p.stdout.toString()).trim().split("\n").filter(Boolean);
      for (const r of remarks) expect(r).toMatch(/^DCGM_FI_DEV_\w+ label names should be written in 'snake_case' not 'camelCase'$/);
      expect(remarks.length).toBeGreaterThan(0); // the lint ran and saw the DCGM families
    });
  }

  test("ranks of one job carry its id on every node (training_job), so Prometheus sums a job across nodes", () => {
    const doc = hostDocument(TORCHRUN.map((s) => ({ ...s, job: s.rank === null ? null : "torchelastic:c1f0" })));
    const text = exposition(doc);
    const ranks = doc.processes.filter((p) => p.pytorch?.job);
    expect(ranks.length).toBe(3);
    for (const p of ranks) expect(text).toMatch(new RegExp(`gpumem_pytorch_reserved_bytes\\{[^}]*pid="${p.pid}",[^}]*rank="${p.pytorch!.rank}",training_job="torchelastic:c1f0"\\} ${p.pytorch!.reserved_bytes}\\n`));
    // A process of no job has no such label.
    for (const p of doc.processes.filter((x) => x.pytorch && !x.pytorch.job)) expect(text).toMatch(new RegExp(`gpumem_pytorch_reserved_bytes\\{[^}]*pid="${p.pid}"[^}]*\\}`));
    expect(text.split("\n").filter((l) => l.includes("training_job=")).every((l) => /rank="\d"/.test(l))).toBe(true);
    if (promtool) {
      const p = Bun.spawnSync([promtool, "check", "metrics"], { stdin: Buffer.from(text), stderr: "pipe", stdout: "pipe" });
      const remarks = (p.stderr.toString() + p.stdout.toString()).trim().split("\n").filter(Boolean);
      for (const r of remarks) expect(r).toMatch(/^DCGM_FI_DEV_\w+ label names should be written in 'snake_case' not 'camelCase'$/);
    }
  });

  test("labels: dcgm-exporter's on its DCGM_FI_* series, lowercase snake_case on every gpumem_* series", () => {
    const text = exposition(hostDocument(TORCHRUN.map((s) => ({ ...s, job: s.rank === null ? null : "run-1" }))));
    const labels = (prefix: string) => new Set(text.split("\n").filter((l) => l.startsWith(prefix)).flatMap((l) => [...(/\{(.*)\}/.exec(l)?.[1] ?? "").matchAll(/(\w+)="/g)].map((m) => m[1]!)));
    expect([...labels("DCGM_FI_")].sort()).toEqual(["Hostname", "UUID", "device", "gpu", "modelName", "pci_bus_id"]);
    const ours = labels("gpumem_");
    expect([...ours].filter((l) => !/^[a-z][a-z0-9_]*$/.test(l))).toEqual([]);
    for (const l of ["uuid", "hostname", "gpu", "pid", "training_job"]) expect(ours.has(l)).toBe(true);
  });

  test("gpumem_build_info says the version, Bun and the schema; gpumem_nvml_up says whether NVML answered, and why not", () => {
    const [, recorded] = documents[0]!;
    const text = exposition(recorded);
    expect(text).toContain(`gpumem_build_info{version="${pkg.version}",bun="${Bun.version}",schema="${SCHEMA_VERSION}"} 1\n`);
    expect(text).toContain(`gpumem_nvml_up{hostname="${recorded.host}"} 1\n`);
    // This machine's own document, as `--json --once` prints it: with no GPU (this test machine),
    // a reason, and the page says it beside the build, not one bare line.
    const p = Bun.spawnSync([process.execPath, join(import.meta.dir, "..", "..", "src", "cli.ts"), "--json", "--once"], { stdout: "pipe", stderr: "pipe" });
    const here = JSON.parse(p.stdout.toString()) as Document;
    const page = exposition(here);
    if (here.reason !== null) {
      expect(page).toContain(`gpumem_nvml_up{hostname="${here.host}",reason="${here.reason}"} 0\n`);
      expect(page).toContain("# HELP gpumem_nvml_up ");
      expect(page).toContain("gpumem_build_info{");
      expect(page.trim().split("\n").filter((l) => !l.startsWith("#")).length).toBeGreaterThan(2);
    } else {
      expect(page).toContain(`gpumem_nvml_up{hostname="${here.host}"} 1\n`);
    }
  });

  test("label values are escaped so a hostile process name cannot break the format", () => {
    const doc = structuredClone(documents[0]![1]);
    doc.host = 'evil"host\\\nname';
    const text = exposition(doc);
    expect(text).toContain('hostname="evil\\"host\\\\\\nname"');
    for (const line of text.trim().split("\n")) expect(line).toMatch(/^(# (HELP|TYPE) |[a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})? \S+$)/);
  });
});

describe("serve", () => {
  let dir = "";
  let prom: ReturnType<typeof Bun.spawn> | null = null;
  afterAll(() => {
    prom?.kill();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  (prometheus ? test : test.skip)(`a real Prometheus server scrapes gpumem-tui serve ${prometheus ? "" : SKIP}`, async () => {
    dir = mkdtempSync(join(tmpdir(), "gpumem-prom-"));
    const [, doc] = documents[0]!;
    let scrapes = 0;
    const server = startServer({ tick: () => (scrapes++, doc) }, { port: 0, hostname: "127.0.0.1" });
    const promPort = 19090 + (process.pid % 500);
    writeFileSync(
      join(dir, "prometheus.yml"),
      `global: {scrape_interval: 1s}\nscrape_configs:\n  - job_name: gpumem\n    static_configs: [{targets: ["127.0.0.1:${server.port}"]}]\n`,
    );
    prom = Bun.spawn([prometheus!, `--config.file=${join(dir, "prometheus.yml")}`, `--storage.tsdb.path=${join(dir, "data")}`, `--web.listen-address=127.0.0.1:${promPort}`], { stdout: "ignore", stderr: "ignore" });
    const want = Math.round(doc.devices[0]!.memory_total_bytes! / 1);
    let value: string | null = null;
    for (let i = 0; i < 100 && value === null; i++) {
      await Bun.sleep(200);
      try {
        const r = await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=gpumem_gpu_memory_total_bytes`);
        const body = (await r.json()) as { data?: { result?: { value: [number, string] }[] } };
        value = body.data?.result?.[0]?.value[1] ?? null;
      } catch {
        // not up yet
      }
    }
    const up = await (await fetch(`http://127.0.0.1:${promPort}/api/v1/query?query=up{job="gpumem"}`)).json();
    server.stop(true);
    expect(value).toBe(String(want));
    expect((up as { data: { result: { value: [number, string] }[] } }).data.result[0]!.value[1]).toBe("1");
    expect(scrapes).toBeGreaterThan(0);
  }, 40_000);
});
