// The monitor's client for an agent's control socket (docs/protocol.md): one JSON line out, one
// back, with a timeout, so that a stuck agent never freezes the screen. `ask` is the way in: a verb
// of the protocol (protocol.ts) with its arguments, and its reply checked against the protocol
// before anything reads it; `command` is the transport beneath it.
import { createConnection } from "node:net";
import { checkReply, type ArgsOf, type ReplyOf, type Verb } from "./protocol";

/** A line as it came from the agent: JSON, nothing more is known of it. */
export interface Reply {
  ok: boolean;
  error?: string;
  [key: string]: unknown;
}

/** A verb's answer: its reply as the protocol defines it, or why there is none, in one line. */
export type Answer<V extends Verb> = { ok: true; reply: ReplyOf<V> } | { ok: false; error: string };

export type Send = (socket: string, cmd: string, args: Record<string, unknown>, timeoutMs?: number) => Promise<Reply>;

/** Send `verb` to the agent at `socket` and check its reply (an agent's JSON is input, not trusted data). */
export async function ask<V extends Verb>(socket: string, verb: V, args: ArgsOf<V>, timeoutMs?: number, send: Send = command): Promise<Answer<V>> {
  return answerOf(verb, await send(socket, verb, args as Record<string, unknown>, timeoutMs));
}

/** What a raw reply of `verb` says: an error of the agent's, or the reply the protocol defines. */
export async function answerOf<V extends Verb>(verb: V, r: Reply): Promise<Answer<V>> {
  if (!r.ok) return { ok: false, error: typeof r.error === "string" ? r.error : `${verb}: the agent failed without saying why` };
  const { ok: _ok, id: _id, ...fields } = r;
  return checkReply(verb, fields);
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
