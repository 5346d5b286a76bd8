// Bytes by the user's line (user-frame.ts) of the blocks that carry a stack, each block weighed as
// what it stands for (stack-weight.ts: a sampled small block stands for more than itself), and
// the bytes whose line is not known kept apart, never spread over the lines. One sum for every
// place that says which lines hold memory: the findings, the at-peak groups, Prometheus.

import { sampledOut, settle, stackWeight } from "./stack-weight";
import type { BlockTable } from "./blocks";
import { frameLabel, type BlockStacks } from "./user-frame";

export interface LineBytes {
  /** "path/train.py:42 step" */
  label: string;
  /** "train.py:42 step" */
  short: string;
  /** What its blocks stand for (sampled ones weighed), rounded to a byte. */
  bytes: number;
  /** Its blocks that carry the stack (not what sampled ones stand for). */
  blocks: number;
}

/** Where the bytes of a finding or a group lie, by line. */
export interface LineSplit {
  lines: LineBytes[];
  /** Bytes of blocks without a known line: no stack (before the attach, autograd's engine, not
   *  sampled, stacks off), frames not in the manifest yet, or library code only. */
  unknown_bytes: number;
  /** Every block's own bytes. */
  total_bytes: number;
}

/** What a finding may say of a line: one holding at least this share of the bytes it speaks of
 *  (weighed); below it the line would be a guess, and the finding names none. */
export const CITE_SHARE = 0.5;

export class LineSums {
  private readonly by = new Map<number, { raw: number; weighed: number; blocks: number }>();
  /** Bytes of blocks without a stack; of those, the ones that may have been sampled out. */
  private unknown = 0;
  private pool = 0;
  private total = 0;

  /** `from`: where the stacks are read, when the sums are split (an OOM's are taken as its record
   *  comes, a snapshot's stacks are given to the model after its records). */
  constructor(private readonly from: { readonly stacks: BlockStacks | null }) {}

  /** One block: its stack id (0: none) and size. */
  add(stack: number, size: number): void {
    this.total += size;
    const sampling = this.from.stacks?.sampling;
    if (stack === 0) {
      this.unknown += size;
      if (sampledOut(size, sampling)) this.pool += size;
      return;
    }
    const e = this.by.get(stack);
    const w = stackWeight(size, sampling);
    if (e) {
      e.raw += size;
      e.weighed += w;
      e.blocks++;
    } else this.by.set(stack, { raw: size, weighed: w, blocks: 1 });
  }

  /** The lines, the most bytes first (then the label), at most `limit` of them; what sampled
   *  blocks stand for comes out of the unsampled ones' bytes (stack-weight.ts: settle). */
  split(limit = Infinity): LineSplit {
    const lines = new Map<string, LineBytes & { raw: number; weighed: number }>();
    let unknown = this.unknown;
    const stacks = this.from.stacks;
    for (const [stack, e] of this.by) {
      const k = stacks ? stacks.userFrame(stack) : -1;
      if (k < 0) {
        // No line to give it (library code only, frames not in the manifest yet): its own bytes.
        unknown += e.raw;
        continue;
      }
      const f = stacks!.frames(stack)[k]!;
      const label = frameLabel(f);
      const l = lines.get(label);
      if (l) {
        l.raw += e.raw;
        l.weighed += e.weighed;
        l.blocks += e.blocks;
      } else lines.set(label, { label, short: frameLabel(f, true), bytes: 0, blocks: e.blocks, raw: e.raw, weighed: e.weighed });
    }
    const all = [...lines.values()];
    const s = settle(
      all.map((l) => l.raw),
      all.map((l) => l.weighed),
      this.pool,
    );
    all.forEach((l, i) => (l.bytes = s.bytes[i]!));
    const claimed = this.pool - s.left;
    const sorted = all.sort((a, b) => b.bytes - a.bytes || (a.label < b.label ? -1 : a.label > b.label ? 1 : 0));
    return { lines: sorted.slice(0, limit).map(({ label, short, bytes, blocks }) => ({ label, short, bytes, blocks })), unknown_bytes: Math.round(unknown - claimed), total_bytes: this.total };
  }
}

/** The line a finding may cite: the top one where it holds at least CITE_SHARE of the bytes
 *  (weighed, against every block's own bytes), else null. */
export function citedLine(s: LineSplit): LineBytes | null {
  const top = s.lines[0];
  return top && s.total_bytes > 0 && top.bytes >= CITE_SHARE * s.total_bytes ? top : null;
}

/** "train.py:42 step (1.50 GiB), train.py:40 step (200.00 MiB)": lines in words with their bytes. */
export function linesInWords(lines: readonly LineBytes[], bytes: (n: number) => string): string {
  return lines.map((l) => `${l.short} (${bytes(l.bytes)})`).join(", ");
}

/** The live blocks of device `d` by stack, taken now; their lines are read from `from.stacks`
 *  when split (frames reach the manifest up to a sync after their records; a snapshot's stacks
 *  come to the model after its records). `d`: a device's state, by what is read of it (so that
 *  the device, whose OOM incidents keep these sums, is not imported back). */
export function liveLineSums(from: { readonly stacks: BlockStacks | null }, d: { readonly device: number; readonly blocks: BlockTable }): LineSums {
  const b = d.blocks;
  const sums = new LineSums(from);
  const stacks = from.stacks;
  for (const slot of b.bySlot.values()) sums.add(b.stack[slot] || (stacks ? stacks.stackOf(d.device, b.address[slot]!) : 0), b.size[slot]!);
  return sums;
}
