// The line profiler's results, asked of an agent with the `lines` verb (docs/protocol.md; its reply
// is defined in protocol.ts and checked there before a view sees it).
import { ask } from "./control";
import { VERBS, type LineFunction } from "./protocol";

export type { LineFunction };
export const LinesReplySchema = VERBS.lines.reply;

/** The line profile of the process behind `socket`, or why there is none, in words. */
export async function fetchLines(socket: string): Promise<{ functions: LineFunction[] } | { error: string }> {
  const a = await ask(socket, "lines", {}, 5_000);
  return a.ok ? { functions: a.reply.functions } : { error: a.error };
}
