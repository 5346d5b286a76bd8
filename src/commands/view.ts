// `gpumem-tui view FILE`: a PyTorch memory snapshot, on the screens or as a summary.
import { writeOut } from "../headless/out";
import { loadScreens } from "./screens";
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  if (opts.json) {
    const { viewJson } = await import("../snapshot/view");
    await writeOut(`${JSON.stringify(await viewJson(opts.rest[0]!))}\n`);
    return 0;
  }
  const { runView } = await loadScreens();
  return await runView(opts.rest[0]!, opts);
}
