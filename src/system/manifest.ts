// The agent's manifest (docs/protocol.md), validated: a manifest that lies or is cut short is
// reported with its path and the field at fault, never trusted.
import type { z } from "zod";

/** The largest manifest read, live or beside a recording. The largest real one is the last of a run
 *  that keeps its files: `final_names` lists every parameter, gradient and optimizer state at about
 *  200 bytes each, so a mixture of experts with an nn.Module per expert (48 layers × 128 experts ×
 *  3 weights, four entries each) writes 15 MB. 4 MiB would refuse it; 64 MiB holds such a model
 *  four times over and bounds what a file that is no manifest can cost. */
export const MAX_MANIFEST_BYTES = 64 * 1024 ** 2;

/** The manifest's schema, built at the first manifest read (manifestSchema), zod loaded with it: a
 *  start where no agent runs (`gpumem-tui --json --once`) reads no manifest, and loading zod cost it
 *  about 4.5 ms (a fifth of the bundle's whole run), building the schema 2 ms more. */
const buildManifestSchema = (z = (require("./zod") as typeof import("./zod")).z) =>
  z.looseObject({
    version: z.literal(1),
    pid: z.number().int().positive(),
    cmdline: z.array(z.string()).default([]),
    rank: z.number().int().nullable().default(null),
    local_rank: z.number().int().nullable().default(null),
    world_size: z.number().int().nullable().default(null),
    /** A job id the launcher gives its ranks (e.g. TORCHELASTIC_RUN_ID); null where none is known. */
    job: z.string().nullable().default(null),
    /** Ranks on this node (torchrun's LOCAL_WORLD_SIZE) and the node's number (GROUP_RANK): this
     *  node runs ranks group_rank × local_world_size … + local_world_size − 1. */
    local_world_size: z.number().int().positive().nullable().default(null),
    group_rank: z.number().int().nonnegative().nullable().default(null),
    /** CUDA device indexes as the process sees them (after CUDA_VISIBLE_DEVICES). */
    devices: z.array(z.number().int().nonnegative()).default([]),
    /** Per index of `devices`, that device's UUID as NVML spells it ("GPU-…"); null where torch
     *  does not say. What CUDA indexes are joined to NVML's on. */
    device_uuids: z.array(z.string().nullable()).default([]),
    /** CUDA_VISIBLE_DEVICES as the process saw it; null where unset. */
    cuda_visible_devices: z.string().nullable().default(null),
    /** The inode of the process's pid namespace (/proc/self/ns/pid): where it differs from the
     *  monitor's, `pid` is the container's pid, not the host's. null where unreadable. */
    pid_namespace: z.number().int().nonnegative().nullable().default(null),
    /** The host's pid of the process where the agent knows it; null otherwise (the monitor finds it). */
    host_pid: z.number().int().positive().nullable().default(null),
    torch_version: z.string().nullable().default(null),
    hook_mode: z.enum(["hook", "polling", "none"]),
    hook_error: z.string().nullable().default(null),
    /** The hook writes each segment record's pool in `extra` (GPUMEM_FEATURE_SEGMENT_POOLS): private
     *  pools (CUDA graphs, torch.cuda.MemPool) can be told apart. False in older recordings. */
    segment_pools: z.boolean().default(false),
    /** Allocations this large carry their Python stack's id in the alloc record's `extra` (0: no
     *  stacks; GPUMEM_TUI_STACKS, cuda/pystack.h); smaller ones where sampled (stack_sample_bytes). */
    stack_min_bytes: z.number().int().nonnegative().default(0),
    /** Allocations below stack_min_bytes carry their stack when sampled, at one per this many bytes
     *  allocated on average (0: none sampled; older recordings): a sampled alloc of size s stands for
     *  s / (1 - exp(-s / stack_sample_bytes)) bytes (docs/protocol.md). */
    stack_sample_bytes: z.number().int().nonnegative().default(0),
    /** The caching allocator's settings as the process's environment gave them (PYTORCH_ALLOC_CONF,
     *  else PYTORCH_CUDA_ALLOC_CONF): how it rounds and splits blocks, which the model follows to
     *  give each block torch's size. null where unset (torch's defaults) or in older recordings. */
    alloc_conf: z.string().nullable().optional(),
    /** The stacks those ids name: id → frames [file, line, function], innermost first. */
    stacks: z.record(z.string(), z.array(z.tuple([z.string(), z.number(), z.string()]))).default({}),
    ring: z.string(),
    /** null in a saved recording: there is no process to ask. */
    socket: z.string().nullable(),
    ranges: z.record(z.string(), z.string()).default({}),
    /** The line profiler's lines: id (the records' `line`) → "file.py:42: code". */
    lines: z.record(z.string(), z.string()).default({}),
    oom_snapshot: z.string().nullable().default(null),
    /** What the process runs without, and why ({feature: sentence}): a feature of the agent's that
     *  failed and turned itself off ("names"), a ring made smaller to fit ("ring"), a squatted
     *  directory replaced ("directory"). Shown on the screens as "feature: sentence". */
    notes: z.record(z.string(), z.string()).default({}),
    /** In the manifest a program started by `run` leaves at exit: the `names` reply taken then
     *  (tensors, the write index they were taken at, step), applied to the blocks live at the end. */
    final_names: z
      .object({ tensors: z.array(z.looseObject({ address: z.number(), size: z.number() })), write_index: z.number().int().nonnegative(), step: z.number().nullable().default(null) })
      .nullable()
      .default(null),
    nvml_used_bytes: z.number().nullable().default(null),
    started_unix_ns: z.number().nullable().default(null),
    /** An agent `gpumem-tui attach` started in a running program: when (steps count from there). */
    attached: z.object({ unix_ns: z.number(), step: z.number().int().default(0) }).nullable().optional(),
    /** Its seed (docs/protocol.md, "The seed"): a JSON file in the agent's directory, read before the ring. */
    seed: z.object({ path: z.string(), bytes: z.number().int().nonnegative(), write_index: z.number().int().nonnegative().nullable().default(null) }).nullable().optional(),
  });
let manifestSchema: ReturnType<typeof buildManifestSchema> | undefined;
export type Manifest = z.infer<ReturnType<typeof buildManifestSchema>>;

export function parseManifest(text: string, path: string): Manifest {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch (e) {
    throw new Error(`manifest ${path} is not JSON: ${(e as Error).message}`);
  }
  const parsed = (manifestSchema ??= buildManifestSchema()).safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new Error(`manifest ${path} is invalid at ${issue.path.join(".") || "(top)"}: ${issue.message}`);
  }
  return parsed.data;
}

/** What a ring's records carry beyond the events (the model reads `extra` by them: setRecordFields). */
export interface RecordFields {
  /** Segment records carry their pool in `extra`. */
  segmentPools?: boolean;
  /** Alloc records at or above the stack threshold carry a stack id in `extra`. */
  allocStacks?: boolean;
  /** The allocator's settings string (the manifest's `alloc_conf`): block-sizes.ts reads it. */
  allocConf?: string | null;
}

/** What a ring's records carry beyond the events, as its manifest says (none without one). */
export function recordFields(m: Manifest | null | undefined): RecordFields {
  return { segmentPools: m?.segment_pools ?? false, allocStacks: (m?.stack_min_bytes ?? 0) > 0, allocConf: m?.alloc_conf ?? null };
}
