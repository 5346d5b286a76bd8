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
