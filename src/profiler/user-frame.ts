// Which line of the user's code allocated a block: the first frame of its stack (innermost first,
// as PyTorch lists them) that is not library code. Library code is torch itself, Python's
// standard library, whatever is installed under site-packages or dist-packages, and native frames
// (C/C++, which stacks="all" records below the Python ones). A user may name more libraries
// (their own wrappers, a vendored package) and may say that a package of theirs is their code even
// where it is installed. One rule, pure, for snapshots' frames and the hook's live stacks alike.

import type { StackSampling } from "./stack-weight";

/** One frame as PyTorch records it. */
export interface Frame {
  file: string;
  line: number;
  name: string;
}

/** What counts as library code beyond the defaults, and what counts as the user's whatever it is. */
export interface UserFrameRule {
  /** Extra library code: path prefixes ("/opt/shared/") or module names ("accelerate", "my.lib"). */
  readonly library: readonly string[];
  /** The user's code even under site-packages or torch: path prefixes or module names. */
  readonly user: readonly string[];
}

export const DEFAULT_USER_FRAME_RULE: UserFrameRule = { library: [], user: [] };

const MODULE = /^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$/;

/** Entries of a rule as a user writes them (an environment variable): separated by ":" or ",",
 *  each a path prefix (it has a "/") or a dotted module name. Throws a sentence on a bad entry. */
export function parseRuleEntries(text: string, what: string): string[] {
  const out: string[] = [];
  for (const raw of text.split(/[:,]/)) {
    const e = raw.trim();
    if (e === "") continue;
    if (!e.includes("/") && !MODULE.test(e)) throw new Error(`${what}: "${e}" is neither a path prefix (with a "/") nor a module name (like accelerate or my_pkg.sub)`);
    out.push(e);
  }
  return out;
}

/** A frame's file with forward slashes (frames recorded on Windows use backslashes). */
const slashes = (file: string) => (file.includes("\\") ? file.replaceAll("\\", "/") : file);

/** Whether `file` (slashed) is under an entry: a path prefix, or a module as a directory or a file. */
function under(file: string, entry: string): boolean {
  if (entry.includes("/")) return file.startsWith(entry);
  const path = entry.replaceAll(".", "/");
  return file.includes(`/${path}/`) || file.endsWith(`/${path}.py`) || file.startsWith(`${path}/`) || file === `${path}.py`;
}

/** Native frames: C/C++ (stacks="all"), unknown files ("??", "") — never a user's line. Python's
 *  pseudo-files (<string>, <stdin>, <ipython-input-…>, <frozen runpy>) are Python. */
function isNative(file: string): boolean {
  if (file === "" || file === "??") return true;
  return !file.startsWith("<") && !/\.pyw?$/.test(file);
}

/** Python's own library (stdlib and installed packages) and torch, by where the file lies. */
const LIBRARY = [
  /\/(site|dist)-packages\//,
  // the monitor's own agent, wherever it was put on the path (its marks are made from its frames)
  /(^|\/)gpumem_agent\//,
  // the standard library frozen into the interpreter
  /^<frozen /,
  // the standard library: …/lib/python3.12/…, …/lib64/python3.11t/…, C:/Python312/Lib/…
  /\/lib(64)?\/python\d+(\.\d+)?[a-z]?\//,
  /(^|\/)Lib\//,
  // torch from a source checkout (an editable install): its packages and modules by name
  /(^|\/)torch\/(_[a-z_]+|__init__|nn|autograd|optim|utils|cuda|distributed|amp|fx|profiler|jit|functional|overrides|serialization|storage|random|export|onnx|library|backends|sparse|special|linalg|fft|masked|nested|ao|testing|multiprocessing|func)[/.]/,
];

export type FrameKind = "user" | "library" | "native";

/** What one frame is under `rule`. */
export function frameKind(file: string, rule: UserFrameRule = DEFAULT_USER_FRAME_RULE): FrameKind {
  const f = slashes(file);
  if (isNative(f)) return "native";
  for (const e of rule.user) if (under(f, e)) return "user";
  for (const e of rule.library) if (under(f, e)) return "library";
  for (const re of LIBRARY) if (re.test(f)) return "library";
  return "user";
}

/** The index of the user frame in `frames` (innermost first), or -1 where every frame is library code. */
export function userFrameIndex(frames: readonly Frame[], rule: UserFrameRule = DEFAULT_USER_FRAME_RULE): number {
  for (let i = 0; i < frames.length; i++) if (frameKind(frames[i]!.file, rule) === "user") return i;
  return -1;
}

/** "path/to/train.py:42 step" (`short`: the file's name only, "train.py:42 step"). */
export function frameLabel(f: Frame, short = false): string {
  const file = short ? slashes(f.file).split("/").pop()! : f.file;
  return `${file || "?"}:${f.line} ${f.name}`.trim();
}

/** Items grouped by the label of their user frame (null: none known), sizes and counts summed, the
 *  most bytes first (then the label, for a stable order). */
export function groupByUserFrame<T>(items: readonly T[], labelOf: (t: T) => string | null, bytesOf: (t: T) => number): { label: string | null; items: T[]; bytes: number }[] {
  const groups = new Map<string | null, { label: string | null; items: T[]; bytes: number }>();
  for (const t of items) {
    const label = labelOf(t);
    let g = groups.get(label);
    if (!g) groups.set(label, (g = { label, items: [], bytes: 0 }));
    g.items.push(t);
    g.bytes += bytesOf(t);
  }
  return [...groups.values()].sort((a, b) => b.bytes - a.bytes || String(a.label).localeCompare(String(b.label)));
}

/** Where each live block was allocated, as a snapshot or the hook recorded it (its stack, by id). */
export interface BlockStacks {
  /** The stack of the live block at `address` on `device`; 0 where none was recorded. */
  stackOf(device: number, address: number): number;
  /** A stack's frames, innermost first (none for 0). */
  frames(stack: number): readonly Frame[];
  /** The index of the stack's user frame in frames(stack), or -1. */
  userFrame(stack: number): number;
  /** How the stacks were taken where not every block has one (the hook's threshold and sampling:
   *  stack-weight.ts); absent where every allocation has its stack (torch's history). */
  readonly sampling?: StackSampling | null;
}
