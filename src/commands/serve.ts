// `gpumem-tui serve`: Prometheus metrics of the sampling session over HTTP.
import type { Options } from "./options";

export async function command(opts: Options): Promise<number> {
  const { startServer } = await import("../headless/serve");
  const { SystemCollector } = await import("../collect/system");
  const { Session } = await import("../collect/session");
  const collector = new SystemCollector();
  let server;
  try {
    server = startServer(new Session(collector), { port: opts.port, hostname: opts.host });
  } catch (e) {
    collector.close();
    throw new Error(`cannot listen on ${opts.host}:${opts.port}: ${(e as Error).message}`);
  }
  process.stderr.write(`gpumem-tui: Prometheus metrics at http://${opts.host}:${server.port}/metrics\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  server.stop(true);
  collector.close();
  return 0;
}
