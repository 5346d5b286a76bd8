// A torchrun launcher's ranks: `attach` on the launcher's pid attaches each of them, one at a time.
import { readdirSync, readFileSync } from "node:fs";
import { ppidOf } from "./preflight";

/** Whether a command line is a PyTorch launcher (torchrun, python -m torch.distributed.run/launch). */
export function isLauncher(argv: string[]): boolean {
  if (argv.some((a) => a.split("/").pop() === "torchrun")) return true;
  const m = argv.indexOf("-m");
  return m >= 0 && /^torch\.distributed\.(run|launch)$/.test(argv[m + 1] ?? "");
}

export function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
  } catch {
    return [];
  }
}

/** Every live descendant of `pid`, in pid order. */
export function descendants(pid: number): number[] {
  const parent = new Map<number, number>();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pp = ppidOf(Number(name));
    if (pp !== null) parent.set(Number(name), pp);
  }
  const out: number[] = [];
  for (const [p] of parent) {
    for (let q = parent.get(p), n = 0; q !== undefined && n < 4096; q = parent.get(q), n++) {
      if (q === pid) {
        out.push(p);
        break;
      }
    }
  }
  return out.sort((a, b) => a - b);
}
