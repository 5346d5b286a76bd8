// Ink (and wrap-ansi, slice-ansi, cli-truncate, widest-line under it) measure every string of every
// frame with string-width, which segments non-ASCII text into graphemes in JavaScript: the screens'
// bars, box lines and braille charts made it a third of a frame's cost. package.json's `overrides`
// puts this in its place: the same interface (a string, { ambiguousIsNarrow, countAnsiEscapeCodes })
// on Bun's native width, the one src/tui/format.ts cuts text with, so what Ink lays out and what the
// screens cut agree to the column.
export default function stringWidth(input, options) {
  return typeof input === "string" ? Bun.stringWidth(input, options) : 0;
}
