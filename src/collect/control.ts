// The monitor's client for an agent's control socket (docs/protocol.md): one JSON line out, one
// back, with a timeout, so that a stuck agent never freezes the screen.
import { createConnection } from "node:net";

export interface Reply {
  ok: boolean;
  error?: string;
  [key: string]: unknown;
}

let nextId = 1;

export function command(socketPath: string, cmd: string, args: Record<string, unknown> = {}, timeoutMs = 10_000): Promise<Reply> {
  return new Promise((resolve) => {
    const id = nextId++;
    let buf = "";
    let done = false;
    const finish = (r: Reply) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      resolve(r);
    };
    const sock = createConnection({ path: socketPath });
    const timer = setTimeout(() => finish({ ok: false, error: `${cmd}: no answer from the agent within ${timeoutMs / 1000} s` }), timeoutMs);
    sock.on("connect", () => sock.write(`${JSON.stringify({ id, cmd, ...args })}\n`));
    sock.on("data", (chunk) => {
      buf += chunk.toString();
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      try {
        finish(JSON.parse(buf.slice(0, nl)) as Reply);
      } catch {
        finish({ ok: false, error: `${cmd}: the agent answered something that is not JSON` });
      }
    });
    sock.on("error", (e) => finish({ ok: false, error: `${cmd}: cannot reach the agent at ${socketPath}: ${e.message}` }));
    sock.on("close", () => finish({ ok: false, error: `${cmd}: the agent closed the connection without an answer` }));
  });
}
