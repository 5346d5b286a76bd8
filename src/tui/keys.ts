// Terminal input as a stream of keys: one read may hold many (a paste, key repeat over SSH, tmux
// send-keys in a burst), and escape sequences (arrows, Home/End, Page Up/Down, Shift-Tab, function
// keys, SGR mouse reports) are split out of it whole, wherever they sit, so that each key counts
// once, in order. Ink's useInput is not used: its keys carry no function-key flags (F1 arrives as
// the text "OP"), and one event may hold a burst of keys.

export type KeyName =
  | "up" | "down" | "left" | "right" | "home" | "end" | "pageup" | "pagedown"
  | "return" | "tab" | "backtab" | "escape" | "backspace" | "delete"
  | "f1" | "f2" | "f3" | "f4" | "f5" | "f6" | "f7" | "f8" | "f9" | "f10" | "f11" | "f12";

export type Key =
  /** A printable character (a letter, a digit, space, punctuation). */
  | { kind: "char"; ch: string }
  /** Ctrl and a letter: `c` for Ctrl-C. */
  | { kind: "ctrl"; ch: string }
  | { kind: "key"; name: KeyName }
  /** An SGR mouse report: button 0 left, 1 middle, 2 right, 64 wheel up, 65 wheel down; x and y from 1. */
  | { kind: "mouse"; button: number; x: number; y: number; press: boolean }
  /** A sequence this monitor has no use for (Insert, a focus report): skipped, never typed. */
  | { kind: "other"; seq: string };

const CSI_FINAL: Record<string, KeyName> = { A: "up", B: "down", C: "right", D: "left", H: "home", F: "end", Z: "backtab" };
/** F1-F4 as xterm and tmux send them: SS3 P…S (`ESC O P`), or CSI with modifiers (`ESC [ 1 ; 2 P`). */
const PQRS: Record<string, KeyName> = { P: "f1", Q: "f2", R: "f3", S: "f4" };
/** `ESC [ N ~`: the vt220 / rxvt / xterm numbers, F1-F4 as rxvt and PuTTY send them (11-14) too. */
const TILDE: Record<string, KeyName> = {
  "1": "home", "7": "home", "4": "end", "8": "end", "5": "pageup", "6": "pagedown", "3": "delete",
  "11": "f1", "12": "f2", "13": "f3", "14": "f4", "15": "f5", "17": "f6", "18": "f7", "19": "f8", "20": "f9", "21": "f10", "23": "f11", "24": "f12",
};
/** The Linux console's F1-F5: `ESC [ [ A` … `ESC [ [ E`. */
const CONSOLE_F: Record<string, KeyName> = { A: "f1", B: "f2", C: "f3", D: "f4", E: "f5" };

/** The keys in `data`, in order. An ESC that starts no sequence is the Escape key. */
export function parseKeys(data: string): Key[] {
  const out: Key[] = [];
  let i = 0;
  while (i < data.length) {
    const c = data[i]!;
    if (c === "\x1b") {
      const n = escapeSequence(data, i);
      out.push(n.key);
      i = n.next;
      continue;
    }
    const code = c.charCodeAt(0);
    if (c === "\r" || c === "\n") out.push({ kind: "key", name: "return" });
    else if (c === "\t") out.push({ kind: "key", name: "tab" });
    else if (code === 0x7f || code === 0x08) out.push({ kind: "key", name: "backspace" });
    else if (code < 0x20) out.push({ kind: "ctrl", ch: String.fromCharCode(code + 0x60) });
    else {
      // One code point (a surrogate pair stays whole).
      const cp = data.codePointAt(i)!;
      const ch = String.fromCodePoint(cp);
      out.push({ kind: "char", ch });
      i += ch.length;
      continue;
    }
    i++;
  }
  return out;
}

function escapeSequence(data: string, at: number): { key: Key; next: number } {
  const kind = data[at + 1];
  if (kind === "[" && data[at + 2] === "[" && at + 3 < data.length) {
    const name = CONSOLE_F[data[at + 3]!];
    return { key: name ? { kind: "key", name } : { kind: "other", seq: data.slice(at, at + 4) }, next: at + 4 };
  }
  if (kind === "[") {
    // CSI: parameters (0x30-0x3f: digits, ';', '<', '?'), intermediates (0x20-0x2f), a final byte.
    let j = at + 2;
    while (j < data.length && data.charCodeAt(j) >= 0x20 && data.charCodeAt(j) <= 0x3f) j++;
    const final = data[j];
    if (final === undefined || data.charCodeAt(j) < 0x40 || data.charCodeAt(j) > 0x7e) return { key: { kind: "key", name: "escape" }, next: at + 1 };
    const params = data.slice(at + 2, j);
    const seq = data.slice(at, j + 1);
    const mouse = /^<(\d+);(\d+);(\d+)$/.exec(params);
    if (mouse && (final === "M" || final === "m")) {
      return { key: { kind: "mouse", button: Number(mouse[1]), x: Number(mouse[2]), y: Number(mouse[3]), press: final === "M" }, next: j + 1 };
    }
    // Modifiers (`1;5A` Ctrl-Up) move the same way; the key is what counts.
    const name = final === "~" ? TILDE[params.split(";")[0]!] : (CSI_FINAL[final] ?? PQRS[final]);
    return { key: name ? { kind: "key", name } : { kind: "other", seq }, next: j + 1 };
  }
  if (kind === "O" && at + 2 < data.length) {
    // SS3: application-mode arrows and Home/End (ESC O A, ESC O H), F1-F4 (ESC O P).
    const name = CSI_FINAL[data[at + 2]!] ?? PQRS[data[at + 2]!];
    return { key: name ? { kind: "key", name } : { kind: "other", seq: data.slice(at, at + 3) }, next: at + 3 };
  }
  return { key: { kind: "key", name: "escape" }, next: at + 1 };
}

/**
 * Keys from successive reads: a sequence cut by the end of a read (SSH may split `ESC [ A`) is
 * held for the next read; what is still held after a moment is flushed (a lone ESC is the key).
 */
export class KeyReader {
  private pending = "";

  push(chunk: string): Key[] {
    const data = this.pending + chunk;
    const cut = incompleteTail(data);
    this.pending = data.slice(cut);
    return parseKeys(data.slice(0, cut));
  }

  /** Whether part of a sequence waits for the next read. */
  get waiting(): boolean {
    return this.pending !== "";
  }

  flush(): Key[] {
    const d = this.pending;
    this.pending = "";
    return parseKeys(d);
  }
}

/** Where an escape sequence begun at the end of `data` starts (data.length: none is begun). */
function incompleteTail(data: string): number {
  const esc = data.lastIndexOf("\x1b");
  if (esc < 0) return data.length;
  const rest = data.slice(esc);
  return rest === "\x1b" || rest === "\x1bO" || rest === "\x1b[[" || /^\x1b\[[\x20-\x3f]*$/.test(rest) ? esc : data.length;
}
