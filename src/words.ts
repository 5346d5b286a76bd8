// Numbers in words, for findings' evidence and for the screens: bytes in binary units as PyTorch
// users read them, shares as percentages. Numbers stay numbers in every JSON output; these strings
// only make a sentence or a cell readable.

const UNITS = ["B", "KiB", "MiB", "GiB", "TiB"];

/** 1536 → "1.50 KiB"; negative values keep their sign. */
export function formatBytes(bytes: number): string {
  const sign = bytes < 0 ? "-" : "";
  let v = Math.abs(bytes);
  let u = 0;
  while (v >= 1024 && u < UNITS.length - 1) {
    v /= 1024;
    u++;
  }
  return u === 0 ? `${sign}${v} B` : `${sign}${v.toFixed(2)} ${UNITS[u]}`;
}

/** 0.613 → "61%". */
export function formatShare(share: number): string {
  return `${Math.round(share * 100)}%`;
}
