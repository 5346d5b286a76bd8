// A changed frame re-renders what changed in it: the tree a tick makes (src/tui/drawn.ts expand)
// hands React the very element objects of the frame before wherever they draw the same, so React
// skips them and everything under them. On the Overview of the GPU recorded on an H100, its power
// figure moving: its charts and table are the objects of the frame before, the line with the power
// is new; the strings drawn are what a screen made from scratch draws.
import { describe, expect, test } from "bun:test";
import { isValidElement, type ReactElement, type ReactNode } from "react";
import type { Document } from "../../src/system/schema";
import { expand } from "../../src/tui/drawn";
import { Overview } from "../../src/tui/screens/overview";
import recorded from "../fixtures/h100-training.json";

const base = recorded as unknown as Document;
const d0 = base.devices[0]!;
const history = new Map([[0, { util: Array.from({ length: 300 }, (_, k) => (k * 7) % 100), memUsed: Array.from({ length: 300 }, (_, k) => k * 2 ** 26), timesMs: Array.from({ length: 300 }, (_, k) => k * 1000) }]]);
const overview = (doc: Document) => <Overview doc={doc} history={history} width={160} height={50} selected={0} sort="memory" reverse={false} filter="" ascii={false} replay={null} sampling replayHint="" replayAt="" />;

/** Every element of a made tree (Ink's only) with its place. */
function elements(node: ReactNode, at = "", out = new Map<string, ReactElement>()): Map<string, ReactElement> {
  if (Array.isArray(node)) node.forEach((n, i) => elements(n as ReactNode, `${at}[${i}]`, out));
  else if (isValidElement(node)) {
    out.set(at, node);
    elements((node.props as { children?: ReactNode }).children, `${at}/`, out);
  }
  return out;
}

/** The texts of the elements under `el`, as drawn. */
const words = (el: ReactElement): string => expand(el).key;

describe("a changed frame hands React only what changed", () => {
  test("the Overview's power moving: the line that says it is new, its charts and table are the frame before's objects", () => {
    const first = expand(overview(base));
    const moved = { ...base, devices: [{ ...d0, power_draw_milliwatts: 128_000 }] };
    const second = expand(overview(moved));
    expect(second.key).not.toBe(first.key);
    // What is drawn is what a tree made from nothing draws.
    expect(second.key).toBe(expand(overview(moved)).key);
    const a = elements(first.node);
    const b = elements(second.node);
    const kept = [...b].filter(([at, el]) => a.get(at) === el);
    const made = [...b].filter(([at, el]) => a.get(at) !== el);
    // New: the power's line and the elements that hold it, up to the screen's root; nothing else.
    expect(made.length).toBeGreaterThan(0);
    expect(made.every(([, el]) => words(el).includes("128/700 W"))).toBe(true);
    // Kept: the charts (one text each, its rows) and the table's header, among others.
    expect(kept.some(([, el]) => words(el).includes("GPU utilization (%)"))).toBe(true);
    expect(kept.some(([, el]) => words(el).includes("┤"))).toBe(true);
    expect(kept.some(([, el]) => words(el).includes("COMMAND"))).toBe(true);
    expect(kept.length).toBeGreaterThan(made.length);
  });
});
