// The line profiler's results, asked of an agent with the `lines` verb (docs/protocol.md) and
// checked before a view sees them: another process's JSON is input, not trusted data.
import { z } from "zod";
import { command } from "./control";

const bytes = z.number().int().nonnegative();
const LineSchema = z.object({
  line: z.number().int().positive(),
  code: z.string(),
  hits: z.number().int().nonnegative(),
  alloc_bytes: bytes,
  freed_bytes: bytes,
  n_alloc: z.number().int().nonnegative(),
  n_free: z.number().int().nonnegative(),
  peak_active: bytes.nullable(),
  peak_reserved: bytes.nullable(),
});
const FunctionSchema = z.object({
  function: z.string(),
  filename: z.string(),
  first_line: z.number().int().nonnegative(),
  calls: z.number().int().nonnegative(),
  profiled_calls: z.number().int().nonnegative(),
  lost_records: z.number().int().nonnegative(),
  lines: z.array(LineSchema),
});
export const LinesReplySchema = z.object({ functions: z.array(FunctionSchema) });
export type LineFunction = z.infer<typeof FunctionSchema>;

/** The line profile of the process behind `socket`, or why there is none, in words. */
export async function fetchLines(socket: string): Promise<{ functions: LineFunction[] } | { error: string }> {
  const r = await command(socket, "lines", {}, 5_000);
  if (!r.ok) return { error: r.error ?? "no reply" };
  const parsed = LinesReplySchema.safeParse(r);
  if (!parsed.success) return { error: `the agent's line profile is malformed: ${parsed.error.issues[0]?.path.join(".")}: ${parsed.error.issues[0]?.message}` };
  return { functions: parsed.data.functions };
}
