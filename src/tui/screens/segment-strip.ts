// A segment drawn as a strip of cells: used where a block lies, free elsewhere.

/** `width` cells for a segment of `size` bytes, a cell full where any used block touches it. */
export function segmentStrip(size: number, used: { offset: number; size: number }[], width: number, ascii: boolean): string {
  const cells = new Array(width).fill(false);
  for (const u of used) {
    const a = Math.floor((u.offset / size) * width);
    const b = Math.max(a + 1, Math.ceil(((u.offset + u.size) / size) * width));
    for (let i = a; i < Math.min(b, width); i++) cells[i] = true;
  }
  return cells.map((c) => (c ? (ascii ? "#" : "█") : ascii ? "." : "░")).join("");
}
