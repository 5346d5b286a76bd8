// Formatting for the screens. Bytes as PyTorch users read them (binary units).
export { formatBytes } from "../words";

export function pad(s: string, width: number, right = false): string {
  if (s.length > width) return width > 1 ? `${s.slice(0, width - 1)}…` : s.slice(0, width);
  return right ? s.padStart(width) : s.padEnd(width);
}

/** `text` in lines of at most `width` characters, broken at spaces; a word longer than a line (a
 *  path) is broken where the line ends, so nothing of it is lost. */
export function wrap(text: string, width: number): string[] {
  const w = Math.max(1, width);
  const out: string[] = [];
  for (const para of text.split("\n")) {
    let line = "";
    for (let word of para.split(" ")) {
      if (line && line.length + 1 + word.length > w) (out.push(line), (line = ""));
      while (word.length > w - (line ? line.length + 1 : 0)) {
        const room = w - (line ? line.length + 1 : 0);
        if (room <= 0) (out.push(line), (line = ""));
        else (out.push(line ? `${line} ${word.slice(0, room)}` : word.slice(0, room)), (word = word.slice(room)), (line = ""));
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
