// `gpumem-tui serve`: Prometheus metrics of the sampling session over HTTP.
import { liveModels } from "./live-models";
import type { Options } from "./options";

/** Why a server cannot listen, in words instead of the socket call's error code. */
export function listenError(host: string, port: number, e: NodeJS.ErrnoException): string {
  const at = `cannot listen on ${host}:${port}`;
  const code = e.code ?? (/in use/i.test(e.message) ? "EADDRINUSE" : "");
  if (code === "EADDRINUSE") return `${at}: the port is in use by another program (--port picks another)`;
  if (code === "EACCES") return `${at}: permission denied (ports below 1024 need root; --port picks another)`;
  if (code === "EADDRNOTAVAIL") return `${at}: ${host} is not an address of this machine (--host 0.0.0.0 listens on all of them)`;
  if (code === "ENOTFOUND" || code === "EAI_AGAIN" || code === "EINVAL") return `${at}: ${host} is not a host name or address of this machine (--host 0.0.0.0 listens on all of them)`;
  return `${at}: ${e.message}`;
}

/** A host name that does not resolve is said as such before the server tries it. */
async function resolvable(host: string): Promise<NodeJS.ErrnoException | null> {
  const { isIP } = await import("node:net");
  if (isIP(host)) return null;
  try {
    await (await import("node:dns/promises")).lookup(host);
    return null;
  } catch (e) {
    return e as NodeJS.ErrnoException;
  }
}

export async function command(opts: Options): Promise<number> {
  const unresolved = await resolvable(opts.host);
  if (unresolved) throw new Error(listenError(opts.host, opts.port, unresolved));
  const { startServer } = await import("../headless/serve");
  const { Machine } = await import("../collect/machine");
  const { Session } = await import("../collect/session");
  // --demo: the demo's recorded machine is what is served (headless/demo.ts), no NVML asked.
  const machine = opts.demo ? new (await import("../headless/demo")).DemoSampler({ speed: opts.speed ?? 1 }) : new Machine();
  let server;
  try {
    server = startServer(machine instanceof Machine ? new Session(machine, liveModels({ keepTrace: false })) : machine, { port: opts.port, hostname: opts.host });
  } catch (e) {
    machine.close();
    throw new Error(listenError(opts.host, opts.port, e as NodeJS.ErrnoException));
  }
  process.stderr.write(`gpumem-tui: Prometheus metrics${opts.demo ? " of the demo's recorded machine" : ""} at http://${opts.host}:${server.port}/metrics\n`);
  await new Promise<void>((resolve) => {
    process.once("SIGINT", resolve);
    process.once("SIGTERM", resolve);
  });
  server.stop(true);
  machine.close();
  return 0;
}
