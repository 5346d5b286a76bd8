// The text the helper queues in the target: agent/gpumem_agent/_inject/bootstrap.py, run through
// exec() in a dict of its own (no name lands in the program's __main__) inside a try that swallows
// everything (a pending call that fails becomes a SystemError in the program), ended by one call.
import { readFileSync } from "node:fs";
import { ROOT } from "../root";

export const BOOTSTRAP_PY = `${ROOT}/agent/gpumem_agent/_inject/bootstrap.py`;
/** Sent ahead of the bootstrap: what it imports comes from trusted directories only, by location. */
export const TRUST_PY = `${ROOT}/agent/gpumem_agent/trust.py`;
export const AGENT_PATH = `${ROOT}/agent`;

/** Test-only: `DIR/MODULE.py` to import instead of gpumem_agent (its attach_running is called). */
export const PAYLOAD_ENV = "GPUMEM_TUI_ATTACH_PAYLOAD";

export interface BootArgs {
  token: string;
  secret: string;
  /** The directory the agent's thread loads `module` from (by location, never through sys.path),
   *  and the module whose attach_running it calls. */
  path: string;
  module: string;
  /** The monitor that owns this attach: its pid and /proc start time (field 22, clock ticks). The
   *  agent detaches when that process exits (attaching.py, monitor_alive). Null: nobody owns it,
   *  the agent stays until `detach` or the program's exit (`attach --no-monitor`). */
  monitor?: { pid: number; start: number | null } | null;
}

/** The page's address is known only inside the helper, after its mmap: it fills this in, same
 *  length (cuda/inject.c, PAGE_PLACEHOLDER). */
export const PAGE_PLACEHOLDER = "__GPUMEM_PAGE_ADDR";

/** The page the helper maps for `bytes` of text and its NUL: whole pages (cuda/inject.c). */
export function pageLength(bytes: number): number {
  return Math.ceil((bytes + 1) / 4096) * 4096;
}

export function payload(env: NodeJS.ProcessEnv = process.env): { path: string; module: string } {
  const p = env[PAYLOAD_ENV];
  if (!p) return { path: AGENT_PATH, module: "gpumem_agent" };
  const slash = p.lastIndexOf("/");
  return { path: p.slice(0, slash), module: p.slice(slash + 1).replace(/\.py$/, "") };
}

/** JSON strings are Python string literals (escapes \\" \\\\ \\n \\uXXXX all mean the same); null is None. */
const py = (v: string | number | null) => (v === null ? "None" : JSON.stringify(v));

/** trust.py, bootstrap.py and its one call of boot(), run in a dict of its own, every exception swallowed. */
function bootText(a: BootArgs, page: string, len: number): string {
  const owner = a.monitor ? `, ${py(a.monitor.pid)}, ${py(a.monitor.start)}` : "";
  const source = `${readFileSync(TRUST_PY, "utf8")}\n${readFileSync(BOOTSTRAP_PY, "utf8")}\nboot(${py(a.token)}, ${py(a.secret)}, ${page}, ${len}, ${py(a.path)}, ${py(a.module)}${owner})\n`;
  return `try:\n exec(compile(${py(source)}, "<gpumem-bootstrap>", "exec"), {"__name__": "__gpumem_bootstrap__"})\nexcept BaseException:\n pass\n`;
}

export function pageText(a: BootArgs): string {
  const text = (len: number) => bootText(a, PAGE_PLACEHOLDER, len);
  // The length is written into the text: a second pass where its digits moved it past a page.
  let len = pageLength(Buffer.byteLength(text(4096)));
  while (pageLength(Buffer.byteLength(text(len))) !== len) len = pageLength(Buffer.byteLength(text(len)));
  return text(len);
}

/** CPython 3.14+ (PEP 768): the same bootstrap as the script file the interpreter opens at its safe
 *  point (cuda/inject.c remote-exec). No page (0, 0: nothing to unmap). The file removes itself
 *  first: it must stay until the interpreter has read it, which only the script itself knows. */
export function scriptText(a: BootArgs, script: string): string {
  return `try:\n __import__("os").unlink(${py(script)})\nexcept BaseException:\n pass\n${bootText(a, "0", 0)}`;
}
