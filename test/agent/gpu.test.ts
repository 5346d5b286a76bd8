// The agent in real training processes on a GPU (`bun run test:gpu`): every scenario of
// test/agent/gpu_run.sh, then what torch said against what the ring's header said.
import { beforeAll, describe, expect } from "bun:test";
import { existsSync, mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gpuTest, onGpu } from "../support/gpu";

// GPUMEM_AGENT_REPORTS keeps the scenarios' reports (bench/gpu-session.sh keeps them).
const out = process.env.GPUMEM_AGENT_REPORTS ?? mkdtempSync(join(tmpdir(), "gpumem-agent-gpu-"));
// biome-ignore lint: reports are plain JSON
type Report = any;
const report = (name: string): Report => JSON.parse(readFileSync(join(out, `${name}.json`), "utf8"));

beforeAll(() => {
  if (!onGpu) return;
  const p = Bun.spawnSync(["bash", join(import.meta.dir, "gpu_run.sh"), out], { stdout: "pipe", stderr: "pipe" });
  if (p.stdout.toString().trim()) console.log(p.stdout.toString());
}, 600_000);

describe("agent on a GPU", () => {
  for (const name of ["normal", "no-zero-grad", "kept-loss-graph", "expandable", "injected", "polling", "many-1", "many-4"]) {
    gpuTest(`${name}: the header's totals equal torch.cuda.memory_allocated / memory_reserved / peaks`, () => {
      const r = report(name);
      const t = r.header.totals;
      expect(t.allocated).toBe(r.torch.memory_allocated);
      expect(t.reserved).toBe(r.torch.memory_reserved);
      expect(t.active).toBe(r.torch.active);
      expect(t.peak_allocated).toBe(r.torch.max_memory_allocated);
      expect(t.peak_reserved).toBe(r.torch.max_memory_reserved);
    });
  }

  for (const name of ["normal", "no-zero-grad", "kept-loss-graph", "expandable", "commands", "oom", "injected"]) {
    gpuTest(`${name}: from allocator events alone (never copied from memory_stats), reserved, its peak, requested bytes and counts equal torch's`, () => {
      const r = report(name);
      const t = r.header.totals;
      expect(r.header.mode).toBe("hook");
      expect(t.reserved).toBe(r.torch.memory_reserved);
      expect(t.peak_reserved).toBe(r.torch.max_memory_reserved);
      expect(t.requested).toBe(r.torch.requested_bytes);
      expect(t.n_alloc).toBe(r.torch.allocation_count);
      expect(t.n_free).toBe(r.torch.free_count);
      expect(t.n_segment_alloc).toBe(r.torch.segment_alloc_count);
      expect(t.n_segment_free).toBe(r.torch.segment_free_count);
    });
  }

  gpuTest("sync records: torch's own allocated at attach and at every step boundary, tied to the stream", () => {
    for (const name of ["normal", "no-zero-grad", "kept-loss-graph", "expandable"]) {
      const h = report(name).header;
      const UNSURE = 2 ** 64 - 1;
      // the attach's (one per visible device, before any record), then one per step on the device
      // trained on: torch's figure right after opt.step()
      const atSteps = (h.syncs as Report[]).filter((x) => x.device === 0).slice(1).filter((x) => x.events !== UNSURE);
      expect({ name, n: atSteps.length }).toEqual({ name, n: h.step_allocated.length });
      expect(atSteps.map((x: Report) => x.allocated)).toEqual(h.step_allocated);
      expect(atSteps.map((x: Report) => x.step)).toEqual(h.step_allocated.map((_: number, k: number) => k));
    }
  });

  gpuTest("the hook is built, cached, and attached in every process; injection needs no code change", () => {
    for (const name of ["normal", "expandable", "injected", "many-1", "many-2", "many-3", "many-4"]) {
      expect({ name, mode: report(name).header.mode }).toEqual({ name, mode: "hook" });
    }
    expect(report("expandable").torch.expandable_segments).toBe(true);
    // Four processes on an empty cache built one library.
    const built = Bun.spawnSync(["bash", "-c", `ls ${out}/shared-cache/gpumem-tui/*.so | wc -l`]).stdout.toString().trim();
    expect(built).toBe("1");
  });

  gpuTest("phases, ranges and steps attribute allocations on a model of known structure", () => {
    const h = report("normal").header;
    expect(h.cur_step).toBe(6);
    for (const phase of ["forward", "backward", "optimizer"]) expect(h.alloc_bytes_by_phase[phase]).toBeGreaterThan(0);
    const ids = Object.fromEntries(Object.entries(h.ranges as Record<string, string>).map(([id, n]) => [n, id]));
    expect(Object.keys(ids)).toEqual(expect.arrayContaining(["train_step", "mlp_block", "Optimizer.step#AdamW.step"]));
    // The MLP's activations are allocated inside mlp_block; AdamW's state inside its step range.
    expect(h.alloc_bytes_by_range[ids.mlp_block!]).toBeGreaterThan(0);
    expect(h.alloc_bytes_by_range[ids["Optimizer.step#AdamW.step"]!]).toBe(h.alloc_bytes_by_phase.optimizer);
    // Backward allocates the gradients: more than forward on this model.
    expect(h.alloc_bytes_by_phase.backward).toBeGreaterThan(h.alloc_bytes_by_phase.forward);
  });

  gpuTest("names: parameters, their gradients and AdamW state; the scan finds every live tensor and says its cost", () => {
    const r = report("names");
    const names = (r.names.tensors as { name: string; category: string }[]).map((t) => `${t.category}:${t.name}`);
    expect(names).toEqual(expect.arrayContaining(["parameter:0.mlp.0.weight", "gradient:0.mlp.0.weight.grad", "optimizer_state:exp_avg of 0.mlp.0.weight", "optimizer_state:exp_avg_sq of 0.mlp.0.weight"]));
    expect(r.scan.tensors.length).toBeGreaterThan(r.names.tensors.length);
    expect(r.scan.scan_ms).toBeGreaterThan(0);
    const addresses = (r.scan.tensors as { address: number }[]).map((t) => t.address);
    expect(new Set(addresses).size).toBe(addresses.length); // storages counted once
  });

  gpuTest("names at_step: taken right after the next optimizer step, gradients included; a bad flag is refused in words", () => {
    const r = report("names");
    expect(r.names_at_step.ok).toBe(true);
    const names = (r.names_at_step.tensors as { name: string; category: string }[]).map((t) => `${t.category}:${t.name}`);
    expect(names).toEqual(expect.arrayContaining(["gradient:0.mlp.0.weight.grad", "optimizer_state:exp_avg of 0.mlp.0.weight"]));
    expect(r.names_at_step.write_index).toBeGreaterThan(0);
    expect(r.names_bad_at_step.error).toMatch(/names: "at_step" must be true or false/);
  });

  gpuTest("names never raise: FSDP2 DTensors by their local shards, freed, meta, fake, pinned, sparse, quantized and wrapped tensors; a failing walk turns names off and training goes on", () => {
    const r = report("names-zoo");
    const off = report("names-zoo-off");
    const err = readFileSync(join(out, "names-zoo.err"), "utf8");
    expect(r.continued).toBe(true);
    expect(r.losses).toEqual(off.losses); // the program's own numbers, as without the agent
    // Nothing of ours on the program's stderr: no message, no traceback through the agent, no
    // warning torch raised in our walk.
    expect(err).not.toContain("gpumem-agent");
    expect(err).not.toContain("gpumem_agent");
    expect(r.fsdp2_param_type).toBe("DTensor");
    for (const tag of ["fsdp2", "zoo"]) {
      for (const kind of ["names", "scan", "at_step"]) expect({ tag, kind, ok: r[`${tag}_${kind}`].ok }).toEqual({ tag, kind, ok: true });
    }
    // FSDP2: the local shards of the parameters and of AdamW's state, gradients alive at the step.
    expect(r.fsdp2_at_step.names).toEqual(expect.arrayContaining(["parameter:0.weight", "gradient:0.weight.grad", "optimizer_state:exp_avg of 0.weight"]));
    const zoo: string[] = r.zoo_at_step.names;
    expect(zoo).toEqual(expect.arrayContaining(["parameter:lin.weight", "optimizer_state:csr of lin.weight (values)", "optimizer_state:coo of lin.weight (values)"]));
    // Only CUDA blocks are named: a storage resized to zero, meta, fake and pinned host tensors are not.
    for (const none of ["parameter:resized", "buffer:meta", "buffer:pinned", "optimizer_state:fake of lin.weight", "optimizer_state:meta of lin.weight", "optimizer_state:cpu of lin.weight"]) expect(zoo).not.toContain(none);
    // A walk that fails: names off, said in the notes and the manifest; phases and training go on.
    expect(r.failing_walk.error).toMatch(/^RuntimeError: names are off in this process: off: RuntimeError: this module's buffers cannot be listed \(at step \d+\)$/);
    expect(r.after_off.error).toMatch(/names are off in this process/);
    expect(Object.keys(r.notes)).toEqual(["names"]);
    expect(r.manifest_notes).toEqual(r.notes);
    expect(r.failures).toEqual({ names: 1 });
    expect(r.phases_on).toBe(true);
  });

  gpuTest("commands: empty_cache releases, dump_snapshot opens in torch.cuda._memory_viz, bad input gets an error", () => {
    const r = report("commands");
    expect(r.empty_cache.ok).toBe(true);
    expect(r.empty_cache.reserved_after[0]).toBeLessThan(r.empty_cache.reserved_before[0]);
    expect(r.dump.ok).toBe(true);
    expect(r.dump.size).toBeGreaterThan(1000);
    expect(r.dump_loaded.segments).toBeGreaterThan(0);
    expect(r.dump_loaded.traces).toBeGreaterThan(0); // history was turned on through the socket
    expect(r.dump.history).toBe(true); // and the agent says so: the monitor need not write its own
    expect(r.dump_loaded.html_bytes).toBeGreaterThan(10000);
    // The monitor names the file (its directory or --dump-dir, never the agent's small /dev/shm).
    expect(r.dump_at.path).toMatch(/\/monitor-named\.pickle$/);
    expect(r.dump_at_exists).toBe(true);
    expect(r.dump_bad_path.error).toMatch(/"path" must be an absolute path ending in \.pickle/);
    expect(r.bad_verb.error).toMatch(/unknown command 'frobnicate'/);
    expect(r.bad_args.error).toMatch(/"enabled" must be true or false/);
    expect(r.info.hook_mode).toBe("hook");
  });

  gpuTest("OOM: an oom record with the request and the free bytes, and a snapshot dumped at once", () => {
    const r = report("oom");
    expect(r.oom_raised).toBe(true);
    expect(r.header.oom_records).toHaveLength(1);
    expect(r.header.oom_records[0].size).toBe(2 ** 44);
    expect(r.header.oom_records[0].free).toBeGreaterThan(0);
    expect(r.header.totals.n_oom).toBe(1);
    expect(r.oom_snapshot).toMatch(/-oom-\d+\.pickle$/);
    expect(existsSync(r.oom_snapshot)).toBe(true);
  });

  gpuTest("a compiler that fails: polling mode, the manifest says why with the command, totals still right", () => {
    const r = report("polling");
    expect(r.header.mode).toBe("polling");
    expect(r.manifest.hook_mode).toBe("polling");
    expect(r.manifest.hook_error).toMatch(/^building the hook failed \(\/bin\/false .*hook\.cpp/);
    expect(r.header.records).toBe(0);
  });

  gpuTest("line profiler: known allocations on known lines, exact bytes, from the allocator's events", () => {
    const r = report("memlab-lines");
    const MiB = 1 << 20;
    expect(r.mode).toBe("hook");
    expect([r.calls, r.lost]).toEqual([2, 0]);
    expect([r.lines["KNOWN-A"].alloc_bytes, r.lines["KNOWN-A"].n_alloc, r.lines["KNOWN-A"].hits]).toEqual([6 * MiB, 2, 2]);
    expect(r.lines["KNOWN-A"].peak_active).toBeGreaterThanOrEqual(3 * MiB);
    expect(r.lines["KNOWN-B"].alloc_bytes).toBe(2 * MiB);
    expect(r.lines["KNOWN-C"].freed_bytes).toBe(6 * MiB);
    expect(r.lines["KNOWN-C"].alloc_bytes).toBe(0);
    expect(r.lines["KNOWN-D"].alloc_bytes).toBe(2 * 5 * 1024);
    expect(r.table).toContain("a = torch.empty(3 * MiB");
    expect(Object.values(r.manifest_lines).some((n) => /memlab\.py:\d+: b = torch\.empty/.test(String(n)))).toBe(true);
  });

  gpuTest("report(): parameters, gradients and AdamW state by name, a view's storage once, the rest of memory_allocated explained", () => {
    const r = report("memlab-report");
    const names = r.rows.map((x: Report) => x.name);
    expect(names.filter((n: string) => n === "0.weight")).toHaveLength(1);
    expect(names).toContain("0.weight.grad");
    expect(names).toContain("exp_avg of 0.weight");
    expect(r.rows.find((x: Report) => x.name === "0.weight").category).toBe("parameter");
    expect(r.text).toContain("memory_allocated()");
    const named = r.rows.reduce((a: number, x: Report) => a + x.size, 0);
    expect(named).toBeLessThanOrEqual(r.memory_allocated);
  });

  gpuTest("courtesy(): the GPU given back inside the block, the same parameters with the same values after, training goes on", () => {
    const r = report("memlab-courtesy");
    expect(r.during.params_on).toBe("cpu");
    expect(r.during.moved_bytes).toBeGreaterThanOrEqual(r.before.training_bytes);
    // Everything moved left the allocator (blocks round up: at least the bytes moved were freed).
    expect(r.before.allocated - r.during.allocated).toBeGreaterThanOrEqual(r.during.moved_bytes);
    expect(r.during.released_bytes).toBeGreaterThan(0);
    expect(r.after.params_on).toBe("cuda:0");
    expect(r.after.checksum_equal).toBe(true);
    expect(r.after.same_parameter_objects).toBe(true);
  });

  gpuTest("%%gpumem: a notebook cell profiled by line (where IPython is installed)", () => {
    const r = report("memlab-magics");
    if (r.skipped) return void console.log(`%%gpumem not checked: ${r.skipped}`);
    expect(r.table).toContain("x = torch.empty(2 * 1024 * 1024");
    expect(r.table).toContain("2.00 MiB");
    expect(r.x_in_namespace).toBe(true);
  });
});
