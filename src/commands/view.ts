// `gpumem-tui view FILE`: a PyTorch memory snapshot, on the screens or as a summary. A large file
// takes seconds to read: a progress line on the terminal (stderr, only where it is a terminal)
// says how far it is, and is cleared once the file is read. Where its blocks were allocated is the
// first frame of their stacks outside library code; GPUMEM_TUI_LIBRARY and GPUMEM_TUI_USER_CODE
// (path prefixes or module names, ":" or "," between them) say what else is library code, and
// what is the user's although installed as a package.
import { writeOut } from "../headless/out";
import { formatBytes } from "../words";
import { loadScreens } from "./screens";
import type { Options } from "./options";

function progressLine(path: string): ((done: number, total: number) => void) | undefined {
  if (!process.stderr.isTTY) return undefined;
  let shown = 0;
  return (done, total) => {
    const now = performance.now();
    if (done < total && now - shown < 200) return;
    shown = now;
    process.stderr.write(done < total ? `\rreading ${path}: ${progressWords(done, total)}\x1b[K` : "\r\x1b[K");
  };
}

/** "12.00 MiB of 230.00 MiB (5%)": binary units, as the screens say a size. */
export function progressWords(done: number, total: number): string {
  return `${formatBytes(done)} of ${formatBytes(total)} (${Math.floor((100 * done) / Math.max(1, total))}%)`;
}

export async function command(opts: Options): Promise<number> {
  const path = opts.rest[0]!;
  // What counts as library code (GPUMEM_TUI_LIBRARY, GPUMEM_TUI_USER_CODE): a bad entry is said
  // before a large file is read, not after.
  const { userFrameRuleFromEnv } = await import("../snapshot/block-stacks");
  userFrameRuleFromEnv();
  if (opts.json) {
    const { viewJson } = await import("../snapshot/view");
    await writeOut(`${JSON.stringify(await viewJson(path, progressLine(path)))}\n`);
    return 0;
  }
  const { runView } = await loadScreens();
  return await runView(path, { ...opts, progress: progressLine(path) });
}
