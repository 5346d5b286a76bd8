// README.md's Keys table against the keys the screens take: every key it lists in backticks is one
// the Help lists (src/tui/screens/help.tsx, next to the key handling) or a screen's, and every key
// the Help lists is in the table, so neither drifts from what the keys do.
import { expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { SCREENS } from "../../src/tui/registry";
import { KEYS } from "../../src/tui/screens/help";

const README = readFileSync(join(import.meta.dir, "../../README.md"), "utf8");

/** The first cells of the table under "## Keys". */
function keyCells(): string[] {
  const section = README.split("\n## Keys\n")[1]!.split("\n## ")[0]!;
  return section.split("\n").filter((l) => l.startsWith("| ") && !l.startsWith("| key") && !l.startsWith("| ---")).map((l) => l.split(" | ")[0]!.slice(2));
}

test("README's Keys table lists the keys the Help lists, and no other", () => {
  const cells = keyCells();
  expect(cells.length).toBeGreaterThan(5);
  const readme = new Set(cells.flatMap((c) => [...c.matchAll(/`([^`]+)`/g)].map((m) => m[1]!)));
  // The Help's single-character keys (its key column: "s  I", "q  F10  Ctrl-C", "+ -").
  const help = new Set(KEYS.flatMap(([k]) => k.split(/\s+/)).filter((k) => k.length === 1 && /[\x21-\x7e]/.test(k)));
  const screens = new Set(SCREENS.map((s) => s.key));
  // `1`…`7`: the screens' keys, first to last.
  readme.delete(`${SCREENS[0]!.key}`), readme.delete(`${SCREENS.at(-1)!.key}`);
  for (const k of readme) expect({ key: k, bound: help.has(k) || screens.has(k) }).toEqual({ key: k, bound: true });
  const all = cells.join(" ");
  for (const k of help) expect({ key: k, inReadme: readme.has(k) }).toEqual({ key: k, inReadme: true });
  // The keys named without backticks.
  for (const named of ["Esc", "Enter", "Tab", "F10", "Ctrl-C", "Page Up/Down", "Home End", "space"]) expect(all).toContain(named);
  expect(cells[0]).toContain(`\`${SCREENS[0]!.key}\`…\`${SCREENS.at(-1)!.key}\``);
});
