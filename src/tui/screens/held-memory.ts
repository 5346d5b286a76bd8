// What a GPU's ledger finds, in words (the document's devices[].ledger.words: memory held by a pid
// that no longer exists here, exited with its memory still held or in another container). A GPU's
// finding belongs to no process, so the process findings (the profiler's) do not carry
// it: the Findings screen lists it above the process's, and the Overview's status line says it
// where the selected row has no finding of its own.
import type { Document } from "../../system/schema";

/** "GPU 0: 1.10 GiB held by pid 4242, which no longer exists here (…)", each GPU's in order;
 *  `device`: that GPU's only. */
export function gpuFindingWords(doc: Document | null, device?: number): string[] {
  const out: string[] = [];
  for (const d of doc?.devices ?? []) {
    if (device !== undefined && d.index !== device) continue;
    for (const w of d.ledger?.words ?? []) out.push(`GPU ${d.index}: ${w}`);
  }
  return out;
}

/** The Overview's status line for a row with no finding of its own: its GPU's, else any GPU's
 *  (the table may be empty: the pid that held the memory is gone), or "". */
export function gpuStatusWords(doc: Document | null, device: number | null): string {
  const own = device === null ? [] : gpuFindingWords(doc, device);
  const w = own[0] ?? gpuFindingWords(doc)[0];
  // Its parenthesis (why a pid may be gone) left to the Findings screen: at 80 columns it was cut.
  return w ? `! warning: ${w.replace(/ \([^()]*\)$/, "")}` : "";
}
