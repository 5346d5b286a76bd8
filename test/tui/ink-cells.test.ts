// The Ink patch's fast paths (patches/ink@8.0.0.patch, build/output.js): a line it takes as a cell
// per UTF-16 unit must be exactly what tokenizing it gives (one unstyled, one-column character per
// unit, the same values), and a text it takes as plain must give the same lines. Held on lines drawn
// from characters that join, vanish, are wide or carry escape codes, beside the ones our screens use.
import { expect, test } from "bun:test";
import { join } from "node:path";

// Ink's own output.js and the modules it reads, as Ink resolves them.
const INK = join(import.meta.dir, "..", "..", "node_modules", "ink", "build");
const { default: Output } = await import(join(INK, "output.js"));
const { styledCharsFromTokens, styledCharsToString, tokenize } = await import(Bun.resolveSync("@alcalzone/ansi-tokenize", INK));
const { default: stringWidth } = await import(Bun.resolveSync("string-width", INK));
type Cell = { value: string; styles: unknown[]; fullWidth: boolean };

const SIMPLE = ["a", "Z", " ", "1", "~", "▼", "…", "×", "│", "─", "⣿", "▁", "é", "ü", "→", "·", "—", "°", "±"];
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
    const pool = rnd(2) ? SIMPLE : [...SIMPLE, ...TRICKY];
    return Array.from({ length: rnd(40) }, () => pool[rnd(pool.length)]).join("");
  });
}

test("a line taken as a cell per unit tokenizes to one plain one-column cell per unit; a plain text splits to the same lines", () => {
  const caches = (new Output({ width: 10, height: 1 }) as { caches: { isCellPerUnit(l: string): boolean; getPlainLines(t: string): string[] | undefined } }).caches;
  let taken = 0;
  for (const line of lines(20_000)) {
    const cells: Cell[] = styledCharsFromTokens(tokenize(line)).filter((c: Cell) => !/^\p{Default_Ignorable_Code_Point}+$/u.test(c.value));
    if (caches.isCellPerUnit(line)) {
      taken++;
      const want = { n: line.length, values: [...line], styled: 0, wide: 0 };
      expect({ n: cells.length, values: cells.map((c) => c.value), styled: cells.filter((c) => c.styles.length).length, wide: cells.filter((c) => stringWidth(c.value) !== 1 || c.fullWidth).length }).toEqual(want);
    }
    const plain = caches.getPlainLines(`${line}\n${line}`);
    if (plain) expect(plain).toEqual([line, line].map((l) => styledCharsToString(styledCharsFromTokens(tokenize(l)).filter((c: Cell) => !/^\p{Default_Ignorable_Code_Point}+$/u.test(c.value)))));
  }
  // both kinds met: the fast path is taken, and refused where it must be
  expect(taken).toBeGreaterThan(5_000);
  expect(taken).toBeLessThan(20_000);
});
