// The Ink patch's fast paths (patches/ink@8.0.0.patch, build/output.js): a line it takes as a cell
// per UTF-16 unit must be exactly what tokenizing it gives (one unstyled, one-column character per
// unit, the same values), a text it takes as plain must give the same lines, and a coloured line's
// cells (SGR codes tokenized one by one, the rest a unit a cell where it can be) must be the
// tokenizer's. Held on lines drawn from characters that join, vanish, are wide or carry escape codes
// (SGR and others, whole and cut), beside the ones our screens use.
import { expect, test } from "bun:test";
import { join } from "node:path";

// Ink's own output.js and the modules it reads, as Ink resolves them.
const INK = join(import.meta.dir, "..", "..", "node_modules", "ink", "build");
const { default: Output } = await import(join(INK, "output.js"));
const { styledCharsFromTokens, styledCharsToString, tokenize } = await import(Bun.resolveSync("@alcalzone/ansi-tokenize", INK));
const { default: stringWidth } = await import(Bun.resolveSync("string-width", INK));
type Cell = { value: string; styles: unknown[]; fullWidth: boolean };

const SIMPLE = ["a", "Z", " ", "1", "~", "▼", "…", "×", "│", "─", "⣿", "▁", "é", "ü", "→", "·", "—", "°", "±"];
const CODES = ["\x1b[33m", "\x1b[39m", "\x1b[1m", "\x1b[22m", "\x1b[2m", "\x1b[7m", "\x1b[27m", "\x1b[0m", "\x1b[m", "\x1b[1;33m", "\x1b[38;5;123m", "\x1b[38;2;1;2;3m", "\x1b[48;5;9m", "\x1b[49m", "\x1b[4m", "\x1b[24m", "\x1b[2K", "\x1b]8;;http://x\x07", "\x1b]8;;\x07", "\x1b[", "\x1b[3"];
const TRICKY = ["中", "😀", "👍🏽", "e\u0301", "\u0301", "\u200d", "\ufe0f", "\u00ad", "\u1160", "\u0600", "\ue000", "ｱ", "한", "\t", "\u2028", "\x1b[33m", "\x1b[39m", "\x1b[7m", "\u009b", "\x7f"];

function lines(n: number): string[] {
  let seed = 7; // mulberry32: a linear congruence's low bits would alternate
  const rnd = (k: number) => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return (((t ^ (t >>> 14)) >>> 0) % k);
  };
  return Array.from({ length: n }, () => {
    const kind = rnd(3);
    const pool = kind === 0 ? SIMPLE : kind === 1 ? [...SIMPLE, ...SIMPLE, ...CODES] : [...SIMPLE, ...TRICKY, ...CODES];
    return Array.from({ length: rnd(40) }, () => pool[rnd(pool.length)]).join("");
  });
}

test("a line taken as a cell per unit tokenizes to one plain one-column cell per unit; a plain text splits to the same lines; a coloured line has the tokenizer's cells", () => {
  const caches = (new Output({ width: 10, height: 1 }) as { caches: { isCellPerUnit(l: string): boolean; getPlainLines(t: string): string[] | undefined; getStyledChars(l: string): Cell[] } }).caches;
  let taken = 0;
  for (const line of lines(20_000)) {
    const cells: Cell[] = styledCharsFromTokens(tokenize(line)).filter((c: Cell) => !/^\p{Default_Ignorable_Code_Point}+$/u.test(c.value));
    if (caches.isCellPerUnit(line)) {
      taken++;
      const want = { n: line.length, values: [...line], styled: 0, wide: 0 };
      expect({ n: cells.length, values: cells.map((c) => c.value), styled: cells.filter((c) => c.styles.length).length, wide: cells.filter((c) => stringWidth(c.value) !== 1 || c.fullWidth).length }).toEqual(want);
    }
    expect(caches.getStyledChars(line)).toEqual(cells);
    const plain = caches.getPlainLines(`${line}\n${line}`);
    if (plain) expect(plain).toEqual([line, line].map((l) => styledCharsToString(styledCharsFromTokens(tokenize(l)).filter((c: Cell) => !/^\p{Default_Ignorable_Code_Point}+$/u.test(c.value)))));
  }
  // both kinds met: the fast path is taken, and refused where it must be
  expect(taken).toBeGreaterThan(3_000);
  expect(taken).toBeLessThan(20_000);
});
