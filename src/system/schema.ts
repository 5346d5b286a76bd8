// The headless document: one zod schema, the single definition of what `--json` prints.
// Numbers are numbers (bytes are integers), "not available" is null, never 0 or a string.
import { z } from "zod";

import { SCHEMA_VERSION } from "./version";
import { BEHIND_WORDS, FIRST_DIED_LEAD_SECONDS } from "./job-rules";
import { UNALLOCATED } from "../words";
import { ForecastSchema } from "./forecast-schema";

export { SCHEMA_VERSION };

const bytes = z.number().int().nonnegative();
const nullableInt = z.number().int().nullable();

/** What a GPU's memory is made of, summing to its total (src/system/ledger-rows.ts gpuLedger). */
export const GpuLedgerSchema = z
  .object({
    total_bytes: z.number().int(),
    container_view: z
      .boolean()
      .default(false)
      .describe("the monitor runs in a pid namespace of its own (a container): the driver lists to NVML only that namespace's processes, so not_listed holds the memory of every process outside it"),
    rows: z
      .array(
        z.object({
          kind: z.enum(["processes", "other_users", "gone", "not_listed", "driver_reserved", "free"]),
          bytes: z.number().int(),
          pids: z.array(z.number().int()).describe("the processes the row stands for"),
        }),
      )
      .describe("processes: NVML's used of the processes it lists that run as the monitor's user; other_users: those of other users; gone: those /proc has no process of (exited with the memory still held, or in another container); not_listed: used that no listed process accounts for (the driver's own few MiB; with container_view, every process outside the monitor's pid namespace); driver_reserved: the driver's own (NVML v2; absent where NVML counts it in used); free"),
    words: z.array(z.string()).describe("findings in words: memory held by a process that no longer exists"),
  })
  .describe("the GPU's memory, summing to its total");

export const DeviceSchema = z.object({
  index: z.number().int().nonnegative(),
  name: z.string(),
  uuid: z.string(),
  pci_bus_id: z.string(),
  memory_total_bytes: bytes.nullable(),
  memory_used_bytes: bytes.nullable().describe("NVML's used memory (driver reserve excluded where the driver reports it apart)"),
  memory_free_bytes: bytes.nullable(),
  memory_reserved_bytes: bytes.nullable().describe("memory the driver reserves for itself"),
  gpu_utilization_percent: nullableInt,
  memory_utilization_percent: nullableInt,
  encoder_utilization_percent: nullableInt,
  decoder_utilization_percent: nullableInt,
  temperature_celsius: nullableInt,
  power_draw_milliwatts: nullableInt,
  power_limit_milliwatts: nullableInt,
  fan_speed_percent: nullableInt,
  sm_clock_mhz: nullableInt,
  sm_clock_max_mhz: nullableInt,
  memory_clock_mhz: nullableInt,
  memory_clock_max_mhz: nullableInt,
  graphics_clock_mhz: nullableInt,
  pcie_rx_bytes_per_second: z.number().nonnegative().nullable().describe("over the interval between the last two reads of the device's PCIe counters (the first two samples, then every 5 s); null on the first sample: a rate needs two"),
  pcie_tx_bytes_per_second: z.number().nonnegative().nullable(),
  performance_state: z.number().int().min(0).max(15).nullable().describe("P-state: 0 is the fastest"),
  error: z.string().nullable().describe("the first unexpected NVML error of this sample, in NVML's words"),
  recorded: z.boolean().optional().describe("true: a GPU of the machine a replayed recording was made on (the demo), shown beside this machine's; absent for this machine's own"),
  ledger: GpuLedgerSchema.nullable().optional().describe("what the GPU's memory is made of, summing to its total; null without NVML's memory figures"),
});

/** What each finding is; the detectors (src/profiler/findings.ts) make only these. "fragmentation"
 *  is no longer made (documents written before "reserved_unallocated" replaced it still read). */
export const FindingIdSchema = z
  .enum(["oom", "growth", "gradients_kept", "reserved_unallocated", "fragmentation", "non_pytorch", "outside_jump", "partial"])
  .describe(
    `outside_jump: memory outside PyTorch grew between two samples with no library's mark open (the ledger's unexplained), after the mark or step it names; reserved_unallocated: ${UNALLOCATED} memory (reserved − allocated, the default pool's) where it costs something: allocation retries beyond the OOMs', an OOM it would have held in no free block that large, or memory idle at a step's peak; fragmentation: its name in documents of earlier versions, no longer made`,
  );

/** A line of the user's code a finding cites (src/profiler/line-bytes.ts). */
export const FindingLineSchema = z.object({
  role: z
    .enum(["grows", "asked", "holding", "backward", "optimizer", "freed"])
    .describe("grows: allocated the memory held at step boundaries that grows (a tensor kept by reference elsewhere is named where it was made); asked: made the request that ran out of memory; holding: allocated live memory at that moment; backward / optimizer: called backward / the optimizer's step; freed: allocated the blocks whose frees left the unallocated holes"),
  at: z.string().describe('the first frame outside library code: "path/train.py:42 step"'),
  bytes: z.number().nullable().describe("the bytes it stands for (sampled small blocks weighed: stack_sample_bytes), where it is about bytes"),
  blocks: z.number().int().nullable().describe("its blocks that carry a stack"),
});

export const FindingSchema = z.object({
  id: FindingIdSchema,
  severity: z.enum(["error", "warning", "info"]),
  title: z.string(),
  evidence: z.string().describe("the evidence in words, numbers included"),
  numbers: z.record(z.string(), z.union([z.number(), z.string(), z.null()])).describe("the same evidence as numbers (bytes, µs, steps) and names"),
  lines: z
    .array(FindingLineSchema)
    .optional()
    .describe("the lines of the user's code it cites, where the recording has stacks (none where a line is not known well enough: no line rather than a wrong one)"),
});

const StepShareSchema = z.object({
  alloc_bytes: z.number(),
  temporary_bytes: z.number(),
  held_at_end_bytes: z.number(),
  share_of_step_peak: z.number(),
});

export const ProfileSchema = z
  .object({
    device: z.number().int().describe("the CUDA device index the profile is of"),
    detail: z.object({
      partial: z.boolean().describe("block detail incomplete, for the causes given; totals stay exact"),
      causes: z.array(z.string()).describe("why, in words: records lost (the ring lapped), memory from before the agent attached, blocks filled in by a resync, a sync that disagreed"),
      lost_records: z.number().int(),
      sync_checks: z.number().int().describe("points of the stream (step boundaries) where the blocks were compared with torch's own memory_allocated()"),
      sync_disagreed: z.number().int(),
      seed: z
        .object({
          state: z.enum(["pending", "applied", "refused"]),
          reason: z.string().nullable().describe("why it was refused, in words"),
          blocks: z.number().int().describe("blocks from before the attach it added"),
          bytes: z.number().int(),
          kept: z.number().int().describe("blocks the records had made that it kept"),
        })
        .nullable()
        .default(null)
        .describe("for a process `gpumem-tui attach` started the agent in: what the allocator held at the attach, tied to a point of the stream (applied: block detail whole from the attach on); null otherwise"),
      totals_source: z
        .enum(["blocks", "hook", "records"])
        .optional()
        .describe("where the process's allocated, active, reserved and peak come from: blocks (every live block of torch's size: torch's memory_allocated(), active_bytes and max_memory_allocated() at the point of the stream read), hook (the ring header's running totals: torch's figures at the agent's last copy, moved by requested sizes since; where the blocks are not all known), records (the requests rounded: a replay before its header)"),
      totals_cause: z.string().nullable().optional().describe("why the totals are not the blocks', in words; null where they are"),
    }),
    totals: z
      .object({
        allocated_bytes: z.number(),
        active_bytes: z.number(),
        reserved_bytes: z.number(),
        peak_allocated_bytes: z.number().describe("torch's max_memory_allocated(): the one peak every screen shows"),
        peak_note: z.string().nullable().describe("why the peak is not the highest the blocks reached, in words (reached before the attach, or the blocks not all known); null where it is"),
      })
      .optional()
      .describe("the process's totals as detail.totals_source says; the pytorch block's figures are these"),
    step: z.number().int(),
    phase: z.string(),
    range: z.string().nullable().describe("the innermost record_function range now"),
    steps_complete: z.number().int(),
    last_step: z
      .object({
        step: z.number().int(),
        duration_us: z.number().nullable(),
        peak_allocated_bytes: z.number(),
        peak_phase: z.string().nullable(),
        peak_range: z.string().nullable(),
        held_at_end_bytes: z.number(),
        torch_allocated_at_end_bytes: z.number().nullable(),
        phases: z.array(StepShareSchema.extend({ phase: z.string(), peak_allocated_bytes: z.number().nullable() })),
        ranges: z.array(StepShareSchema.extend({ name: z.string().nullable(), peak_allocated_bytes: z.number() })),
      })
      .nullable()
      .describe("the last complete step, by phase and by record_function range; null before one ends"),
    peak_step: z
      .object({
        step: z.number().int(),
        peak_allocated_bytes: z.number(),
        peak_phase: z.string().nullable(),
        alive_at_peak: z
          .object({
            groups: z.array(z.object({ label: z.string(), category: z.string(), bytes: z.number(), blocks: z.number() })).describe("the largest groups of blocks alive at the peak, by tensor name or label"),
            other_bytes: z.number().describe("the blocks of the groups left out"),
            unseen_bytes: z.number().describe("the peak less every block seen alive at it (records lost, blocks from before the recording)"),
          })
          .nullable()
          .optional()
          .describe("what was alive at the peak, adding up to it; null where that step's blocks are no longer kept"),
      })
      .nullable()
      .describe("the kept step with the highest peak"),
    reserved_unallocated: z
      .object({
        bytes: z.number().describe("reserved − allocated now, private pools left out: memory PyTorch's caching allocator holds that no tensor uses; it swings within a step (between steps it holds the step's activations)"),
        step: z.number().int().nullable().describe("the step measured at its peak: the last complete one, else the running one"),
        at_step_peak_bytes: z.number().nullable().describe("reserved − allocated at that step's peak allocated, private pools left out: what the cache held that even the step's highest moment did not use"),
        largest_alloc_bytes: z.number().nullable().describe("that step's largest block: the most one free block had to hold for it"),
        private_pools: z
          .array(z.object({ pool_id: z.array(z.number().int()).describe("segment_pool_id"), segments: z.number().int(), reserved_bytes: z.number(), allocated_bytes: z.number() }))
          .nullable()
          .describe("CUDA graphs' and torch.cuda.MemPool's pools with their own bytes, counted apart; null where they cannot be told apart (a ring recorded without pools in its segment records: their memory counts in bytes)"),
      })
      .nullable()
      .default(null)
      .describe(`${UNALLOCATED} memory (reserved − allocated of the default pool), now and at a step's peak; the finding reserved_unallocated says where it costs something`),
    categories: z.array(z.object({ category: z.string(), bytes: z.number(), blocks: z.number() })).describe("live memory by category"),
    lines: z
      .object({
        top: z
          .array(z.object({ at: z.string().describe('the first frame outside library code: "path/train.py:42 step"'), bytes: z.number(), blocks: z.number().int() }))
          .describe("the lines of the user's code holding the most live memory, most first (at most 10): sampled small blocks weighed as the bytes they stand for (the manifest's stack_sample_bytes)"),
        unknown_bytes: z.number().describe("live bytes whose line is not known: blocks without a stack (not sampled, before the attach, autograd's engine), library code only, frames not yet in the manifest"),
      })
      .nullable()
      .optional()
      .describe("live memory by the line of the user's code that allocated it, where the recording has stacks; null without"),
    largest_tensors: z
      .array(
        z.object({
          label: z.string().describe("the tensor's name, else what is known of the block: category, phase, range, step"),
          name: z.string().nullable(),
          category: z.string(),
          size_bytes: z.number(),
          shape: z.array(z.number()).nullable(),
          dtype: z.string().nullable(),
          phase: z.string(),
          step: z.number().int().nullable(),
          range: z.string().nullable(),
          allocated_at: z.string().nullable().optional().describe("the line of the user's code that allocated it (the first frame outside library code), where its stack is known"),
        }),
      )
      .describe("the largest live blocks, largest first"),
    findings: z.array(FindingSchema).describe("what is wrong, in words and numbers, most severe first"),
  })
  .describe("what the monitor's model of the process knows below the totals: the same figures as the screens");

/** What is outside PyTorch, row by row, summing to NVML's used bytes (src/profiler/ledger.ts). */
export const LedgerSchema = z
  .object({
    nvml_used_bytes: z.number().int().describe("NVML's used bytes of the process on this GPU at this sample: what the rows sum to"),
    outside_pytorch_bytes: z.number().int().describe("NVML used − torch's reserved: every row but allocated, reserved-unallocated and the private pools"),
    rows: z
      .array(
        z.object({
          kind: z.enum(["allocated", "reserved_unallocated", "private_pool", "context", "library", "unexplained"]),
          name: z.string().describe('the row in words: "PyTorch allocated", "private pool (1, 0)", "CUDA context", "NCCL", "unexplained"'),
          bytes: z.number().int().describe("negative only for unexplained, where the rows above claim more than NVML shows (a library freed memory after its mark)"),
          note: z.string().nullable().describe("what more is known: communicators, the mark's event, when the context was seen"),
        }),
      )
      .describe("allocated and reserved-unallocated of the default pool, each private pool, the CUDA context (NVML − reserved at the first sample of one moment, or at the first after torch's first allocation where that sample came before it, and its growth as kernels load in the first step; named 'CUDA context and libraries loaded before the monitor saw the process' where the program had run before that sample, attached to or with steps done: the two are not told apart), each library by the agent's marks (`gpumem:LIBRARY:EVENT` ranges: the change of NVML − reserved while the mark was open), and unexplained: what is left, always shown"),
    jumps: z
      .array(z.object({ time_us: z.number(), bytes: z.number().int(), after: z.string().describe("the mark it followed, or the step and phase") }))
      .describe("changes of unexplained memory of 64 MiB or more between two samples, newest last"),
  })
  .describe("what is outside PyTorch: a ledger that accounts for every byte NVML sees of the process");

export const PytorchSchema = z.object({
  hook_mode: z.enum(["none", "hook", "polling"]),
  device: z.number().int().describe("the CUDA device index these figures are of, as the process numbers its devices (CUDA_VISIBLE_DEVICES renumbers them); the row's `device` is NVML's index of the same GPU"),
  allocated_bytes: z.number().int(),
  reserved_bytes: z.number().int(),
  active_bytes: z.number().int(),
  peak_allocated_bytes: z.number().int(),
  peak_reserved_bytes: z.number().int(),
  non_pytorch_bytes: z.number().int().nullable().describe("NVML used − reserved: CUDA context, NCCL, cuBLAS workspaces…"),
  alloc_count: z.number().int(),
  oom_count: z.number().int(),
  alloc_retries: z.number().int(),
  step: z.number().int(),
  phase: z.string(),
  rank: z.number().int().nullable(),
  job: z.string().nullable().default(null).describe("the job this process is a rank of, as its agent names it (the same on every node: torchrun's run id or rendezvous address, Slurm's job)"),
  torch_version: z.string().nullable(),
  attached_unix_ns: z
    .number()
    .int()
    .nullable()
    .optional()
    .describe("when `gpumem-tui attach` started the agent in this already running process; null where it started with the program. Steps count from the attach: step 0 runs until the first optimizer step after it"),
  notes: z
    .record(z.string(), z.string())
    .default({})
    .describe('what the agent in this process runs without, and why, as its manifest says: {feature: sentence}, e.g. {"names": "off: RuntimeError: … (at step 12)"} for a feature that failed and turned itself off; "hook": why the allocator hook is not used (the manifest\'s hook_error); "ring" also where the monitor stopped reading a ring cut short under it'),
  profile: ProfileSchema.nullable().default(null).describe("null where the monitor has read no allocator event of the process yet (`--json --once` reads its ring once)"),
  forecast: ForecastSchema.nullable().optional().describe("will it fit: the peak at other batch sizes, the largest batch that fits, time to OOM (src/profiler/forecast.ts); null before a settled step, and where memory from before an attach is not named (no seed)"),
  ledger: LedgerSchema.nullable().optional().describe("absent where NVML does not list the process (no used bytes) or the monitor keeps no model of it"),
});

export const ProcessSchema = z.object({
  pid: z.number().int().positive().describe("the host's pid, as NVML reports it"),
  agent_pid: z
    .number()
    .int()
    .positive()
    .nullable()
    .default(null)
    .describe("the pid the gpumem agent inside the process names it by: its pid in its own pid namespace; it differs from pid in a container (another pid namespace), and where the host's pid could not be found pid is this one too, nvml_visible is false and a warning says why; null where no agent runs"),
  pid_namespace: z.number().int().nonnegative().nullable().default(null).describe("the inode of the process's pid namespace, as its agent reports it (/proc/PID/ns/pid); null where no agent says"),
  device: z.number().int().nonnegative(),
  kind: z.enum(["compute", "graphics", "compute+graphics"]),
  used_bytes: bytes.nullable().describe("GPU memory NVML attributes to this process on this device"),
  user: z.string().nullable(),
  name: z.string().nullable(),
  command: z.string().nullable(),
  pytorch: PytorchSchema.nullable().describe("from the gpumem agent inside the process; null where none runs"),
  gpu_sm_percent: nullableInt
    .default(null)
    .describe("the share of this GPU's SM time the process used in NVML's newest utilization sample of it (nvmlDeviceGetProcessUtilization), read every 3 s (it costs a monitor ten times the rest of a sample); null where the GPU does not report it, had no sample of the process, or the process is newer than the last read"),
  cpu_percent: z.number().nonnegative().nullable().default(null).describe("CPU time of the process since the previous sample, in % of one core (/proc); null on the first sample"),
  host_memory_bytes: bytes.nullable().default(null).describe("the process's resident host memory (RSS, /proc/PID/status VmRSS)"),
  run_time_seconds: z.number().nonnegative().nullable().default(null).describe("how long the process has run (/proc/PID/stat start time against /proc/uptime)"),
  nvml_visible: z.boolean().describe("false: NVML does not list this pid (another pid namespace, or no CUDA context yet); used_bytes is then null"),
  exited: z.boolean().describe("the process has exited; its last numbers are kept"),
  recorded: z.boolean().optional().describe("true: the process of a replayed recording (the demo), long gone, on a recorded GPU; absent for this machine's own"),
});

export const JobRankSchema = z.object({
  rank: z.number().int(),
  local_rank: z.number().int().nullable(),
  pid: z.number().int().positive(),
  device: z.number().int().nonnegative().nullable().describe("the NVML device holding most of this rank's reserved memory"),
  allocated_bytes: z.number().int().nullable().describe("null where the agent's figures cannot be read"),
  reserved_bytes: z.number().int().nullable(),
  peak_allocated_bytes: z.number().int().nullable(),
  peak_reserved_bytes: z.number().int().nullable(),
  phase: z.string().nullable(),
  step: z.number().int().nullable(),
  step_seconds: z.number().nonnegative().nullable().default(null).describe("how long the rank's last complete step took, in seconds; null before one is timed (a one-shot sample reads no events)"),
  exited: z.boolean(),
  died: z.boolean().default(false).describe("exited without its agent detaching (killed, crashed: the ring was never closed); false while running and after a clean exit"),
  outside_pytorch_bytes: nullableInt.default(null).describe("NVML used − reserved of the rank (its ledger's outside_pytorch_bytes), summed over its devices; null where NVML has no used bytes of it"),
  ledger: LedgerSchema.nullable().optional().describe("the rank's ledger on its main device (the process's pytorch.ledger)"),
});

export const JobSchema = z.object({
  id: z.string().describe("the job id the agents wrote in their manifests, else `ppid:<launcher pid>`"),
  name: z.string().describe("the command line the ranks share"),
  launcher_pid: z.number().int().nonnegative().nullable().describe("the ranks' common parent (torchrun, mpirun…); null where they have none in common"),
  world_size: z.number().int().positive(),
  pids: z.array(z.number().int().positive()).describe("the ranks' pids, in rank order"),
  ranks: z.array(JobRankSchema).describe("the ranks on this host, in rank order"),
  missing_ranks: z.array(z.number().int()).describe("ranks this host should run with no process here: not started or gone (of host_ranks where the launcher says which those are, else of 0 … world_size − 1, where a rank on another node also counts)"),
  host_ranks: z
    .object({ first: z.number().int().nonnegative(), count: z.number().int().nonnegative() })
    .nullable()
    .default(null)
    .describe("the block of ranks this node runs (torchrun's GROUP_RANK × LOCAL_WORLD_SIZE …), null where the agents do not say"),
  used_bytes: bytes.nullable().describe("NVML's memory of the ranks, summed; null where NVML lists none of them"),
  allocated_bytes: z.number().int().describe("the ranks' allocated bytes, summed"),
  reserved_bytes: z.number().int().describe("the ranks' reserved bytes, summed"),
  step_min: nullableInt.describe("the lowest step of the ranks: ranks out of step are apart"),
  step_max: nullableInt,
  peak_rank: nullableInt.describe("the rank with the highest peak allocated bytes (with two ranks or more)"),
  peak_allocated_bytes: nullableInt.describe("that rank's peak"),
  peak_margin_bytes: nullableInt.describe("how far that peak lies above the highest peak of the other ranks"),
  outside_rank: nullableInt
    .default(null)
    .describe("the rank whose memory outside PyTorch stands out: at least 256 MiB and a quarter above the median of the other ranks (rank 0 often holds more: NCCL's extra communicators, a second context); null where none does"),
  outside_margin_bytes: nullableInt.default(null).describe("how far that rank's memory outside PyTorch lies above the other ranks' median"),
  outside_part: z.string().nullable().default(null).describe('the ledger row that differs most from the median rank\'s: "NCCL +900.00 MiB"; null where the ledgers do not tell'),
  state: z
    .enum(["running", "incomplete", "ended"])
    .default("running")
    .describe("running: every rank this host should run is here and alive; incomplete: some are missing or have exited while others still run, or every rank has exited and one of them died (killed, crashed); ended: every rank has exited cleanly"),
  behind_ranks: z
    .array(z.number().int())
    .default([])
    .describe(`running ranks ${BEHIND_WORDS} (the steps they lack at the leading ranks' step time; by steps alone before a step is timed); ranks a step apart are not behind`),
  first_died: nullableInt
    .default(null)
    .describe(`where two ranks or more died under one launcher: the rank whose agent fell silent first, more than ${FIRST_DIED_LEAD_SECONDS} s before every other (the launcher stopped the others); null where none stands out`),
});

export const DocumentSchema = z.object({
  version: z.literal(SCHEMA_VERSION),
  time_unix_ms: z.number(),
  host: z.string(),
  driver_version: z.string().nullable(),
  nvml_version: z.string().nullable(),
  cuda_driver_version: z.number().int().nullable(),
  reason: z.string().nullable().describe("why devices is empty (no driver, NVML failed), else null"),
  devices: z.array(DeviceSchema),
  processes: z.array(ProcessSchema),
  jobs: z
    .array(JobSchema)
    .default([])
    .describe("multi-rank jobs on this host (agent processes with a rank and world_size > 1 under one launcher, or one job id); each lists its processes' pids"),
  warnings: z.array(z.string()).describe("what was skipped and why: an unsafe agent directory, a manifest that lies, a ring of another version"),
  program: z
    .object({ pid: z.number().int().positive(), exit_status: z.number().int() })
    .nullable()
    .optional()
    .describe("`run --json`'s last line only: the program it ran, ended, with its exit status (its processes' profiles hold the whole run)"),
});

export type Device = z.infer<typeof DeviceSchema>;
export type FindingId = z.infer<typeof FindingIdSchema>;
export type DocumentFinding = z.infer<typeof FindingSchema>;
export type Profile = z.infer<typeof ProfileSchema>;
export type Process = z.infer<typeof ProcessSchema>;
export type Pytorch = z.infer<typeof PytorchSchema>;
export type Job = z.infer<typeof JobSchema>;
export type JobRank = z.infer<typeof JobRankSchema>;
export type Document = z.infer<typeof DocumentSchema>;

/** The document's JSON Schema, for `gpumem-tui schema`. */
export function jsonSchema(): object {
  return { title: "gpumem-tui sample", ...z.toJSONSchema(DocumentSchema) };
}
