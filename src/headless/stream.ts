// `--json`: one document (`--once`) or one line per sample (NDJSON) until interrupted or until
// the reader goes away (`| head -n 3` ends quietly, with status 0).
import type { SystemCollector } from "../collect/system";
import type { Document } from "./schema";

// Documents are printed as built: the tests hold every document the CLI prints to the zod schema,
// and loading zod here would cost more start-up than the whole sample.
export function serialize(doc: Document): string {
  return JSON.stringify(doc);
}

function write(line: string): Promise<void> {
  return new Promise((resolve) => {
    if (process.stdout.write(`${line}\n`)) resolve();
    else process.stdout.once("drain", () => resolve());
  });
}

export async function streamJson(collector: SystemCollector, opts: { once: boolean; intervalMs: number }): Promise<void> {
  process.stdout.on("error", (e: NodeJS.ErrnoException) => {
    if (e.code === "EPIPE") process.exit(0);
    throw e;
  });
  if (opts.once) {
    await write(serialize(collector.sample(Date.now(), { oneShot: true })));
    return;
  }
  let stop = false;
  const quit = () => {
    stop = true;
  };
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
  while (!stop) {
    const started = performance.now();
    await write(serialize(collector.sample()));
    const wait = Math.max(0, opts.intervalMs - (performance.now() - started));
    await new Promise((r) => setTimeout(r, wait));
  }
}
