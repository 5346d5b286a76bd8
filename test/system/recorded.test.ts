// The demo's NVML track: made from documents `gpumem-tui --json --interval 500` wrote on an H100
// while a GPT-2 training ran (test/fixtures/h100-nvml.ndjson: 6 s around the moment the process
// appeared), read back, and turned into the Overview's document at a moment of the replay.
import { describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { DocumentSchema, type Document, type Pytorch } from "../../src/system/schema";
import { parseTrack, sampleAt, trackDocument, trackFromDocuments, trackText, withRecorded } from "../../src/system/recorded";

const docs: Document[] = readFileSync(join(import.meta.dir, "..", "fixtures", "h100-nvml.ndjson"), "utf8")
  .trim()
  .split("\n")
  .map((l) => DocumentSchema.parse(JSON.parse(l)));
const PID = 946;
const track = trackFromDocuments(docs, { pid: PID, from_us: 0, to_us: Infinity, every_ms: 1000, device: 0 });

describe("the NVML track", () => {
  test("one sample a second from half-second documents; the GPU throughout, the process once it exists, without its PyTorch block", () => {
    expect(docs.length).toBe(12);
    expect(track.samples.length).toBe(6);
    const gaps = track.samples.slice(1).map((s, i) => s.t_us - track.samples[i]!.t_us);
    for (const g of gaps) expect(g).toBeGreaterThanOrEqual(900_000);
    expect(track.samples.every((s) => s.devices.length === 1 && s.devices[0]!.name === "NVIDIA H100 80GB HBM3")).toBe(true);
    expect(track.samples[0]!.processes).toEqual([]); // before the training started
    const last = track.samples.at(-1)!;
    expect(last.processes.map((p) => [p.pid, p.agent_pid, p.used_bytes, p.command])).toEqual([[PID, PID, 20594032640, expect.stringContaining("hf_gpt2.py")]]);
    expect("pytorch" in last.processes[0]!).toBe(false);
    expect(last.devices[0]!.gpu_utilization_percent).toBe(100);
    expect(track.header).toMatchObject({ format: "gpumem-tui nvml track", version: 1, pid: PID, driver_version: "580.159.04" });
  });

  test("written and read back unchanged; a bad line is named with its number and what is wrong", () => {
    const text = trackText(track);
    expect(parseTrack(text, "demo.nvml.ndjson")).toEqual(track);
    expect(text.length).toBeLessThan(40_000); // small enough to ship
    const lines = text.trim().split("\n");
    expect(() => parseTrack("", "t.ndjson")).toThrow("t.ndjson: empty, not an NVML track");
    expect(() => parseTrack(`{"format":"other"}\n`, "t.ndjson")).toThrow(/^t\.ndjson:1: not an NVML track header \(format: /);
    expect(() => parseTrack(`${lines[0]}\n{oops\n`, "t.ndjson")).toThrow(/^t\.ndjson:2: not JSON/);
    expect(() => parseTrack(`${lines[0]}\n{"t_us":1,"devices":[{}],"processes":[]}\n`, "t.ndjson")).toThrow(/^t\.ndjson:2: not a track sample \(devices\.0\.index: /);
    expect(() => parseTrack(`${lines[0]}\n`, "t.ndjson")).toThrow("t.ndjson: a header and no sample");
  });

  test("the sample in force at a moment: the last at or before it, the first before the track begins", () => {
    const t = track.samples.map((s) => s.t_us);
    expect(sampleAt(track, t[0]! - 5e6)).toBe(0);
    expect(sampleAt(track, t[2]!)).toBe(2);
    expect(sampleAt(track, t[2]! + 1)).toBe(2);
    expect(sampleAt(track, t[3]! - 1)).toBe(2);
    expect(sampleAt(track, t.at(-1)! + 60e6)).toBe(t.length - 1);
  });

  test("the document at a moment: the GPU and the row `recorded` (their name and command as recorded), the row's PyTorch figures the replay's", () => {
    const pytorch: Pytorch = { ...docs.at(-1)!.processes[0]!.pytorch!, allocated_bytes: 4 * 2 ** 30, reserved_bytes: 18 * 2 ** 30, step: 7, phase: "backward" };
    const d = DocumentSchema.parse(trackDocument(track, track.samples.length - 1, pytorch));
    expect([d.devices[0]!.name, d.devices[0]!.recorded]).toEqual(["NVIDIA H100 80GB HBM3", true]);
    const p = d.processes[0]!;
    expect(p.recorded).toBe(true);
    expect(p.command).toStartWith("python3 test/gpu/hf_gpt2.py");
    expect(p.pytorch).toMatchObject({ step: 7, phase: "backward", non_pytorch_bytes: 20594032640 - 18 * 2 ** 30 });
    // Before the replay has an event: no PyTorch figures, never zeros.
    expect(trackDocument(track, track.samples.length - 1, null).processes[0]!.pytorch).toBeNull();
  });

  test("beside a machine with GPUs of its own: the recorded GPU comes after them, renumbered, its process with it", () => {
    const rec = trackDocument(track, track.samples.length - 1, null);
    const machine = { ...docs[0]!, processes: [] };
    const { doc, index } = withRecorded(machine, rec);
    expect(doc.devices.map((d) => [d.index, d.name, d.recorded ?? false])).toEqual([
      [0, "NVIDIA H100 80GB HBM3", false],
      [1, "NVIDIA H100 80GB HBM3", true],
    ]);
    expect(doc.processes.map((p) => [p.pid, p.device, p.recorded])).toEqual([[PID, 1, true]]);
    expect(index(0)).toBe(1);
    expect(withRecorded(null, rec).doc).toBe(rec);
  });
});
