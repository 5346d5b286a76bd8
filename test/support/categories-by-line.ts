// The categories of the live blocks allocated at each line of one file of a program (the line of
// each block's user frame), sorted: what "the same code gets the same label" compares between runs.
import { blocks, type ProfilerModel } from "../../src/profiler";

export function categoriesByLine(m: ProfilerModel, file: string): Map<number, string[]> {
  const out = new Map<number, Set<string>>();
  const stacks = m.stacks!;
  for (const b of blocks(m, { limit: 1e6 }).blocks) {
    const stack = b.stack || stacks.stackOf(0, b.address);
    const k = stacks.userFrame(stack);
    const f = k >= 0 ? stacks.frames(stack)[k]! : null;
    if (f === null || f.file !== file) continue;
    (out.get(f.line) ?? out.set(f.line, new Set()).get(f.line)!).add(b.category);
  }
  return new Map([...out].map(([line, cats]) => [line, [...cats].sort()]));
}
