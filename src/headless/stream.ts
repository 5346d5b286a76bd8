// `--json`: one document (`--once`) or one line per sample (NDJSON) until interrupted or until
// the reader goes away (`| head -n 3` ends quietly, with status 0).
import type { Session } from "../collect/session";
import { writeOut } from "./out";
import type { Document } from "../system/schema";

// Documents are printed as built: the tests hold every document the CLI prints to the zod schema,
// and loading zod here would cost more start-up than the whole sample.
export function serialize(doc: Document): string {
  return JSON.stringify(doc);
}

/** What gives the documents: the sampling session, or the demo's recorded machine (headless/demo.ts). */
export type DocumentSource = Pick<Session, "tick">;

export async function streamJson(session: DocumentSource, opts: { once: boolean; intervalMs: number }): Promise<void> {
  if (opts.once) {
    await writeOut(`${serialize(session.tick(Date.now(), { oneShot: true }))}\n`);
    return;
  }
  // SIGINT or SIGTERM ends the stream at once, also in the middle of a long wait, after whole lines.
  let stop = false;
  let wake = () => {};
  const quit = () => {
    stop = true;
    wake();
  };
  process.once("SIGINT", quit);
  process.once("SIGTERM", quit);
  while (!stop) {
    const started = performance.now();
    if (!(await writeOut(`${serialize(session.tick())}\n`))) return; // the reader is gone: a quiet end
    const wait = Math.max(0, opts.intervalMs - (performance.now() - started));
    await new Promise<void>((r) => {
      const timer = setTimeout(r, wait);
      wake = () => (clearTimeout(timer), r());
    });
  }
}
