// Two trees' screens measured side by side (bench/overview-redraw.tsx, bench/tensors-redraw.tsx):
// the benchmark runs itself as a child for one tree at a time (CHILD_VAR holding `tree|count`),
// rounds alternating the trees, each child printing one JSON line of its figures.
import { resolve } from "node:path";

/** `rounds` rounds of `script` as a child for each of `trees`, alternating; each child's line. */
export function treeRounds<T>(script: string, childVar: string, trees: Record<string, string>, rounds: number, count: number, env: Record<string, string> = {}): Record<string, T[]> {
  const runs: Record<string, T[]> = Object.fromEntries(Object.keys(trees).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) {
    for (const [label, tree] of Object.entries(trees)) {
      const p = Bun.spawnSync([process.execPath, script], { env: { ...process.env, NODE_ENV: "production", ...env, [childVar]: `${resolve(tree)}|${count}` }, stdout: "pipe", stderr: "pipe" });
      const line = p.stdout.toString().split("\n").find((l) => l.startsWith("{"));
      if (!line) throw new Error(`${label}: ${p.stderr.toString().slice(-500)}`);
      runs[label]!.push(JSON.parse(line) as T);
    }
  }
  return runs;
}

export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** The short commit a tree's checkout is at. */
export const commitOf = (dir: string) => Bun.spawnSync(["git", "-C", dir, "log", "-1", "--format=%h"]).stdout.toString().trim();
