// `gpumem-tui serve`: Prometheus metrics over HTTP. Each scrape samples afresh, but never more
// often than `minIntervalMs` (several scrapers at once share one sample).
import type { Document } from "../system/schema";
import { exposition } from "./prometheus";

/** Anything that produces a document: the sampling session, or a recorded document in tests. */
export interface Sampler {
  tick(now?: number): Document;
}

export function startServer(collector: Sampler, opts: { port: number; hostname: string; minIntervalMs?: number }) {
  const minInterval = opts.minIntervalMs ?? 500;
  let last: { at: number; doc: Document } | null = null;
  const sample = () => {
    const now = Date.now();
    if (!last || now - last.at >= minInterval) last = { at: now, doc: collector.tick(now) };
    return last.doc;
  };
  return Bun.serve({
    port: opts.port,
    hostname: opts.hostname,
    fetch(req) {
      const { pathname } = new URL(req.url);
      if (pathname === "/metrics") {
        return new Response(exposition(sample()), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } });
      }
      if (pathname === "/") {
        return new Response('gpumem-tui: Prometheus metrics at <a href="/metrics">/metrics</a>\n', { headers: { "content-type": "text/html" } });
      }
      return new Response("not found\n", { status: 404 });
    },
  });
}
