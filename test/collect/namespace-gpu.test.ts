// A PyTorch process in its own pid namespace (as in a container without --pid=host), on a GPU
// (`bun run test:gpu`, as root): `gpumem-tui --json --once` joins its agent (pid 1 inside) to the
// host pid NVML reports, its CUDA device to NVML's by UUID, and keeps its files.
import { describe, expect, test } from "bun:test";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { DocumentSchema, type Document } from "../../src/system/schema";
import { GPU_SKIP, onGpu } from "../support/gpu";
import { TORCH_PYTHON_HINT, torchPython } from "../support/torch";

const ROOT = join(import.meta.dir, "..", "..");
const CLI = join(ROOT, "src", "cli.ts");
const MiB = 1024 * 1024;

function skipReason(): string | null {
  if (!onGpu) return GPU_SKIP;
  if (!torchPython()) return `(${TORCH_PYTHON_HINT})`;
  const p = Bun.which("unshare") ? Bun.spawnSync(["unshare", "--pid", "--fork", "--mount-proc", "true"], { stderr: "pipe" }) : null;
  if (!p) return "(needs unshare from util-linux)";
  if (p.exitCode !== 0) return `(unshare --pid is not permitted here, run as root: ${p.stderr.toString().trim()})`;
  return null;
}
const skip = skipReason();

function sample(dir: string): Document {
  const p = Bun.spawnSync([process.execPath, CLI, "--json", "--once"], { env: { ...process.env, GPUMEM_TUI_DIR: dir }, stdout: "pipe", stderr: "pipe" });
  if (p.exitCode !== 0) throw new Error(`gpumem-tui --json --once: status ${p.exitCode}: ${p.stderr.toString()}`);
  return DocumentSchema.parse(JSON.parse(p.stdout.toString()));
}

const TRAIN = `
import sys, time, torch, gpumem_agent
gpumem_agent.attach()
x = torch.empty(256 * 1024 * 1024, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("ready", flush=True)
time.sleep(120)
`;

describe("a process in another pid namespace, on a GPU", () => {
  (skip ? test.skip : test)(`gpumem-tui --json --once joins its agent to NVML's host pid and GPU ${skip ?? ""}`, async () => {
    const devices = sample(mkdtempSync(join(tmpdir(), "gpumem-empty-"))).devices;
    expect(devices.length).toBeGreaterThan(0);
    // The last GPU, as the process's only one (cuda:0): on two GPUs or more, NVML's index differs.
    const gpu = devices[devices.length - 1]!;
    const dir = join(mkdtempSync(join(tmpdir(), "gpumem-ns-gpu-")), "agents");
    mkdirSync(dir, { mode: 0o700 });
    const env = { ...process.env, PYTHONPATH: join(ROOT, "agent"), GPUMEM_TUI_DIR: dir, CUDA_VISIBLE_DEVICES: String(gpu.index) };
    const u = Bun.spawn(["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", torchPython()!, "-c", TRAIN], { env, stdout: "pipe", stderr: "pipe" });
    let host = 0;
    try {
      const out = u.stdout.getReader();
      const first = await out.read();
      if (!new TextDecoder().decode(first.value).includes("ready")) throw new Error(`the process did not start: ${await new Response(u.stderr).text()}`);
      host = Number(readFileSync(`/proc/${u.pid}/task/${u.pid}/children`, "utf8").trim().split(/\s+/)[0]);
      const manifestPath = join(dir, "1.json"); // pid 1 in its namespace
      for (let i = 0; i < 600 && !existsSync(manifestPath); i++) await Bun.sleep(100);
      const manifest = JSON.parse(readFileSync(manifestPath, "utf8"));
      expect(manifest.pid).toBe(1);
      expect(manifest.device_uuids).toEqual([gpu.uuid]); // torch's UUID, spelled as NVML does
      expect(manifest.cuda_visible_devices).toBe(String(gpu.index));
      expect(`pid:[${manifest.pid_namespace}]`).toBe(readlinkSync(`/proc/${host}/ns/pid`));

      const doc = sample(dir);
      const rows = doc.processes.filter((p) => p.agent_pid === 1 && p.pid_namespace === manifest.pid_namespace);
      expect(rows.map((p) => [p.pid, p.device, p.nvml_visible, p.exited])).toEqual([[host, gpu.index, true, false]]);
      const p = rows[0]!;
      expect(p.used_bytes).not.toBeNull();
      expect(p.used_bytes!).toBeGreaterThan(256 * MiB);
      expect(p.pytorch).not.toBeNull();
      expect(p.pytorch!.device).toBe(0);
      expect(p.pytorch!.reserved_bytes).toBeGreaterThanOrEqual(256 * MiB);
      expect(p.pytorch!.allocated_bytes).toBeGreaterThanOrEqual(256 * MiB);
      expect(p.pytorch!.non_pytorch_bytes).toBe(p.used_bytes! - p.pytorch!.reserved_bytes);
      expect(doc.warnings.filter((w) => w.includes("agent of pid 1"))).toEqual([]);
      // No row under the agent's own pid: host pid 1 is init.
      expect(doc.processes.some((x) => x.pid === 1)).toBe(false);
      expect(existsSync(manifestPath)).toBe(true); // not taken for stale
    } finally {
      if (host) process.kill(host, "SIGKILL");
      u.kill("SIGKILL");
      await u.exited;
    }
  }, 180_000);
});
