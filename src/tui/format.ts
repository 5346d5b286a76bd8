// Formatting for the screens. Bytes as PyTorch users read them (binary units).
export { formatBytes } from "../words";

export function pad(s: string, width: number, right = false): string {
  if (s.length > width) return width > 1 ? `${s.slice(0, width - 1)}…` : s.slice(0, width);
  return right ? s.padStart(width) : s.padEnd(width);
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
