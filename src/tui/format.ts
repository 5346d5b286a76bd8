// Formatting for the screens. Bytes as PyTorch users read them (binary units).
export { formatBytes, inPhase, phaseLabel } from "../words";

/** Bytes in at most 8 characters, three significant digits (a chart's axis): "144 MiB", "3.27 GiB". */
export function formatBytesShort(bytes: number): string {
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let v = Math.max(0, bytes);
  let u = 0;
  while (v >= 1024 && u < units.length - 1) (v /= 1024), u++;
  const digits = u === 0 || v >= 100 ? 0 : v >= 10 ? 1 : 2;
  return `${v.toFixed(digits)} ${units[u]}`;
}

/** What marks a GPU or process of a replayed recording (the demo), before its name or command. */
export function recordedMark(x: { recorded?: boolean }): string {
  return x.recorded ? "[recorded] " : "";
}

/** What a table shows where a figure is not known: never 0, which would be a figure. */
export const UNKNOWN = "–";

/** A run time as htop shows it: "42s", "12:05" (minutes), "3:07:12" (hours), "2d 03:07". */
export function formatDuration(seconds: number): string {
  const s = Math.floor(seconds);
  if (s < 60) return `${s}s`;
  const two = (n: number) => String(n).padStart(2, "0");
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}:${two(s % 60)}`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h}:${two(m % 60)}:${two(s % 60)}`;
  return `${Math.floor(h / 24)}d ${two(h % 24)}:${two(m % 60)}`;
}

const graphemes = new Intl.Segmenter(undefined, { granularity: "grapheme" });

/** Columns `s` takes on a terminal: a CJK character or an emoji two, a combining mark none. */
export const textWidth = (s: string): number => Bun.stringWidth(s);

/** The longest head of `s` within `width` columns, cut between graphemes: never in a character
 *  (half a surrogate pair or a UTF-8 sequence is U+FFFD on the terminal), never half a wide one. */
export function cut(s: string, width: number): string {
  if (textWidth(s) <= width) return s;
  let out = "";
  let used = 0;
  for (const { segment } of graphemes.segment(s)) {
    const w = textWidth(segment);
    if (used + w > width) break;
    out += segment;
    used += w;
  }
  return out;
}

/** `s` in exactly `width` columns: padded, or cut with "…" where it is longer. */
export function pad(s: string, width: number, right = false): string {
  const w = textWidth(s);
  if (w > width) {
    const head = width > 1 ? `${cut(s, width - 1)}…` : cut(s, width);
    return head + " ".repeat(Math.max(0, width - textWidth(head)));
  }
  const fill = " ".repeat(Math.max(0, width - w));
  return right ? fill + s : s + fill;
}

/** `s` in `width` columns, cut at its start where too long ("…/runs/exp3/train.py:42 step"): of a
 *  path or "file:line function", the end says most. */
export function cutStart(s: string, width: number): string {
  if (textWidth(s) <= width) return s;
  if (width <= 1) return cut("…", width);
  const parts = [...graphemes.segment(s)].map((g) => g.segment);
  let out = "";
  for (let i = parts.length - 1; i >= 0 && textWidth(parts[i]! + out) <= width - 1; i--) out = parts[i]! + out;
  return `…${out}`;
}

/** Where a dotted name, a path or a sentence may be cut so that each side keeps whole words. */
const NAME_BREAKS = /[./:, ]/;

/**
 * `s` in `width` columns, cut in its middle where too long: of a module's tensor
 * ("transformer.h.7.mlp.c_proj.weight" → "transformer.h.7…c_proj.weight") the start says which
 * block and the end which tensor, so two names that differ only at the end stay apart. The end
 * starts after a "." (or "/", ":", a space) where it can: the longest such end within half the
 * room, or, where that is short of two thirds of the half, the next one within two thirds of the
 * room; the start takes the rest, ending before a break where that keeps two thirds of it.
 */
export function cutMiddle(s: string, width: number): string {
  if (textWidth(s) <= width) return s;
  if (width < 5) return width > 1 ? `${cut(s, width - 1)}…` : cut(s, width);
  const g = [...graphemes.segment(s)].map((x) => x.segment);
  const room = width - 1;
  const half = Math.ceil(room / 2);
  const tails = g.flatMap((_, i) => (i > 0 && NAME_BREAKS.test(g[i - 1]!) ? [i] : [])).reverse(); // shortest first
  const within = tails.filter((i) => widthOf(g, i) <= half).at(-1);
  const longer = tails.find((i) => widthOf(g, i) > half && widthOf(g, i) <= (room * 2) / 3);
  let tail = within !== undefined && widthOf(g, within) >= (half * 2) / 3 ? within : (longer ?? within);
  if (tail === undefined || widthOf(g, tail) < (half * 2) / 3) {
    tail = g.length;
    for (let w = 0; tail > 0 && w + textWidth(g[tail - 1]!) <= half; ) w += textWidth(g[--tail]!);
  }
  const headShare = room - widthOf(g, tail);
  let head = 0;
  for (let w = 0; head < tail && w + textWidth(g[head]!) <= headShare; ) w += textWidth(g[head++]!);
  for (let i = head; i > 0 && widthOf(g, 0, i) >= (headShare * 2) / 3; i--) {
    if (NAME_BREAKS.test(g[i] ?? "")) {
      head = i;
      break;
    }
  }
  return `${g.slice(0, head).join("")}…${g.slice(tail).join("")}`;
}

/** Columns of graphemes `g[from..to)` (to: the end by default). */
const widthOf = (g: string[], from: number, to = g.length) => textWidth(g.slice(from, to).join(""));

/**
 * Short pieces of a line ("allocated 1.22 GiB", "peak 2.88 GiB") laid in lines of at most `width`
 * columns, `sep` between two on a line (or `sep[i]` before piece i): a line breaks between pieces, never inside one, so no
 * figure is cut. A piece wider than a line has one of its own. The indexes of each line's pieces.
 */
export function flow(pieces: string[], width: number, sep: string | string[] = "  "): number[][] {
  const lines: number[][] = [];
  let used = 0;
  pieces.forEach((p, i) => {
    const w = textWidth(p);
    const before = textWidth(typeof sep === "string" ? sep : (sep[i] ?? ""));
    const last = lines.at(-1);
    if (last && used + before + w <= width) return (last.push(i), (used += before + w));
    lines.push([i]);
    used = w;
  });
  return lines;
}

/** A sentence's clauses ("…, " "…; "): the pieces flow() lays where a line may break. */
export const clauses = (text: string): string[] => text.split(/(?<=[,;]) /);

/** `text` in lines of `width`, broken after a clause's comma or semicolon (never inside a figure);
 *  a clause wider than a line is wrapped at its spaces. */
export function wrapClauses(text: string, width: number): string[] {
  const parts = clauses(text);
  return flow(parts, width, " ").flatMap((idx) => wrap(idx.map((i) => parts[i]).join(" "), width));
}

/** `s` in `width` columns, cut after its last whole word that fits, with "…"; a figure whose unit
 *  would be cut off goes with it ("grows by…", never "grows by 1.98…"): no figure is cut. */
export function cutWords(s: string, width: number): string {
  if (textWidth(s) <= width) return s;
  const head = cut(s, width - 1);
  // Whole words only: where the cut falls inside a word, back to the space before it.
  let kept = s[head.length] === " " ? head : head.slice(0, Math.max(0, head.lastIndexOf(" ")));
  kept = kept.trimEnd();
  while (/\s\S*\d\S*$/.test(kept)) kept = kept.replace(/\s\S*$/, "").trimEnd();
  return kept.trim() ? `${kept}…` : `${head}…`;
}

/**
 * A status message in lines of `width`: where it fits, one line; else its sentence in one line (cut
 * after a whole word) and each path in it (a line of its own, from "/", as actions and `run` write
 * them) in full on the lines after it, wrapped where it is wider than a line: a log or a snapshot
 * that cannot be found is no answer.
 */
export function messageLines(text: string, width: number): string[] {
  const parts = text.split("\n");
  const joined = parts.join("  ");
  if (textWidth(joined) <= width) return [joined];
  const paths = parts.filter((p) => p.startsWith("/"));
  const words = parts.filter((p) => !p.startsWith("/")).join("  ");
  const chunks = (p: string) => {
    const out: string[] = [];
    for (let rest = p; rest; ) {
      const head = cut(rest, width) || rest.slice(0, 1);
      out.push(head);
      rest = rest.slice(head.length);
    }
    return out;
  };
  return [...(words ? [cutWords(words, width)] : []), ...paths.flatMap(chunks)];
}

/** `text` in lines of at most `width` columns, broken at spaces; a word longer than a line (a
 *  path) is broken where the line ends, between graphemes, so nothing of it is lost. */
export function wrap(text: string, width: number): string[] {
  const w = Math.max(1, width);
  const out: string[] = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (let word of para.split(" ")) {
      if (line && textWidth(line) + 1 + textWidth(word) > w) (out.push(line), (line = ""));
      while (textWidth(word) > w - (line ? textWidth(line) + 1 : 0)) {
        const room = w - (line ? textWidth(line) + 1 : 0);
        const head = room > 0 ? cut(word, room) : "";
        if (!head) (out.push(line), (line = ""));
        else (out.push(line ? `${line} ${head}` : head), (word = word.slice(head.length)), (line = ""));
        if (!head && !line && room === w) break; // a grapheme wider than the line: left whole
      }
      line = line ? `${line} ${word}` : word;
    }
    out.push(line);
  }
  return out;
}

export function pct(v: number | null | undefined): string {
  return v === null || v === undefined ? "n/a" : `${Math.round(v)}%`;
}

export function orNa(v: number | null | undefined, unit = ""): string {
  return v === null || v === undefined ? "n/a" : `${v}${unit}`;
}

export function rate(bytesPerSecond: number | null | undefined): string {
  if (bytesPerSecond === null || bytesPerSecond === undefined) return "n/a";
  const units = ["B/s", "KB/s", "MB/s", "GB/s"];
  let v = bytesPerSecond;
  let i = 0;
  while (v >= 1000 && i < units.length - 1) {
    v /= 1000;
    i++;
  }
  return `${v.toFixed(v >= 100 || i === 0 ? 0 : 1)} ${units[i]}`;
}

/** Colors unless NO_COLOR is set (https://no-color.org). */
export const useColor = !process.env.NO_COLOR;
export function color(c: string): string | undefined {
  return useColor ? c : undefined;
}
