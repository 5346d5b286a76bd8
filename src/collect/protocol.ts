// The control socket's protocol, defined once: every verb, its arguments (with their defaults) and
// its reply. The monitor validates each reply against it (control.ts `ask`); the agent's side,
// agent/gpumem_agent/protocol.py, is generated from it (`bun src/collect/protocol-gen.ts`), checks
// each request's arguments with it, and answers each verb with one method of the same name and
// arguments (agent/gpumem_agent/commands.py). test/collect/protocol.test.ts fails when the two sides
// disagree. docs/protocol.md describes the verbs and points here for the fields.
//
// Loaded only when a command is sent (zod costs start-up that `--json --once` must not pay).
import { z } from "zod";
import { CATEGORIES } from "../profiler/categories";

const count = z.number().int().nonnegative();
const bytes = count;
/** What a request or a reply may say of a verb: `args` holds each argument, optional ones with a default. */
export interface VerbSpec {
  /** One line: what the verb does (the generated Python carries it as the method's contract). */
  doc: string;
  args: z.ZodObject;
  reply: z.ZodObject;
  /** Answered only by an agent that `gpumem-tui attach` started. */
  attachedOnly?: true;
}

const none = z.object({}).strict();

/** A tensor the agent names: its block's address and size, and what it is. */
export const NamedTensorSchema = z.object({
  address: z.number().int().positive(),
  size: bytes,
  name: z.string().nullable(),
  category: z.enum(CATEGORIES),
  shape: z.array(count),
  dtype: z.string(),
  device: z.number().int().nonnegative(),
});

const LineSchema = z.object({
  line: z.number().int().positive(),
  code: z.string(),
  hits: count,
  alloc_bytes: bytes,
  freed_bytes: bytes,
  n_alloc: count,
  n_free: count,
  peak_active: bytes.nullable(),
  peak_reserved: bytes.nullable(),
});
export const LineFunctionSchema = z.object({
  function: z.string(),
  filename: z.string(),
  first_line: count,
  calls: count,
  profiled_calls: count,
  lost_records: count,
  lines: z.array(LineSchema),
});

export const VERBS = {
  info: {
    doc: "the manifest plus live totals per device, the step, and exceptions caught per feature",
    args: none,
    // The manifest's own fields are src/system/manifest.ts's to check: passed through here.
    reply: z.looseObject({ totals: z.array(z.record(z.string(), z.number())), step: count, failures: z.record(z.string(), count) }),
  },
  names: {
    doc: "the names of the tensors of the models and optimizers the agent saw (scan: every live CUDA tensor)",
    args: z.object({ scan: z.boolean().default(false), at_step: z.boolean().default(false) }).strict(),
    reply: z.object({ tensors: z.array(NamedTensorSchema), skipped: count, scan_ms: z.number().nonnegative(), scan: z.boolean(), write_index: count, step: count }),
  },
  empty_cache: {
    doc: "torch.cuda.empty_cache(), and reserved bytes per device before and after",
    args: none,
    reply: z.object({ reserved_before: z.array(bytes), reserved_after: z.array(bytes) }),
  },
  dump_snapshot: {
    doc: "torch's snapshot to path (only_with_trace: only where memory history is on, else nothing written and path null)",
    args: z
      .object({
        path: z
          .string()
          .regex(/^\/.*\.pickle$/)
          .describe("an absolute path ending in .pickle")
          .nullable()
          .default(null),
        only_with_trace: z.boolean().default(false),
      })
      .strict(),
    reply: z.object({ path: z.string().nullable(), size: bytes.nullable(), history: z.boolean() }),
  },
  history: {
    doc: "torch's memory history on (bounded, Python stacks by default) or off",
    args: z.object({ enabled: z.boolean(), stacks: z.enum(["python", "all"]).default("python"), max_entries: z.number().int().positive().default(100000) }).strict(),
    reply: z.object({ enabled: z.boolean(), stacks: z.enum(["python", "all"]).optional(), max_entries: z.number().int().positive().optional() }),
  },
  reset_peaks: {
    doc: "torch's peak statistics, and the ring's peak reserved, restarted from now",
    args: none,
    reply: z.object({}),
  },
  lines: {
    doc: "the line profiler's results (gpumem_agent.profile), per function and line",
    args: none,
    reply: z.object({ functions: z.array(LineFunctionSchema) }),
  },
  detach: {
    doc: "stop the agent a moment after this reply: hooks removed, files gone",
    args: none,
    // note: a sentence on the detach where there is one to say (the attach tests' probe says who it is).
    reply: z.object({ detaching: z.literal(true), note: z.string().optional() }),
    attachedOnly: true,
  },
} as const satisfies Record<string, VerbSpec>;

export type Verb = keyof typeof VERBS;
export type ArgsOf<V extends Verb> = z.input<(typeof VERBS)[V]["args"]>;
export type ReplyOf<V extends Verb> = z.output<(typeof VERBS)[V]["reply"]>;
export type LineFunction = z.output<typeof LineFunctionSchema>;

/** A reply of `verb` as the protocol defines it, or what is wrong with it in one line. */
export function checkReply<V extends Verb>(verb: V, raw: unknown): { ok: true; reply: ReplyOf<V> } | { ok: false; error: string } {
  const r = VERBS[verb].reply.safeParse(raw);
  if (r.success) return { ok: true, reply: r.data as ReplyOf<V> };
  const issue = r.error.issues[0]!;
  const at = issue.path.length ? issue.path.join(".") : "the reply";
  return { ok: false, error: `${verb}: the agent's reply does not follow the protocol: ${at}: ${issue.message}` };
}
