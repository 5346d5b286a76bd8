// Scrolling a list in a window of lines: which row comes first, and which row a click lands on.

/** The first row a list of `count` rows shows in `room` lines: the selected one stays in view. */
export function firstShown(count: number, room: number, selected: number): number {
  return Math.max(0, Math.min(selected - room + 1, count - room));
}

/** The row under line `line` of a list whose rows start at line `top`, for a click; or null. */
export function rowUnder(count: number, room: number, selected: number, top: number, line: number): number | null {
  const k = line - top;
  const first = firstShown(count, room, selected);
  return k >= 0 && k < room && first + k < count ? first + k : null;
}
