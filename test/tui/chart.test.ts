// Text charts: what a user reads off them.
import { describe, expect, test } from "bun:test";
import { areaChart, bar, markLine, onTimeAxis, phaseRuns, resample } from "../../src/tui/chart";

test("a spike of one sample survives being squeezed into fewer columns", () => {
  const values = new Array(1000).fill(1);
  values[567] = 100;
  expect(Math.max(...resample(values, 10))).toBe(100);
});

test("braille chart: full, empty and half columns; the newest values on the right", () => {
  const [top, bottom] = areaChart([0, 0, 100, 100], { width: 2, height: 2, max: 100 });
  expect(top).toBe("⠀⣿");
  expect(bottom).toBe("⠀⣿");
  const [t2, b2] = areaChart([50, 50], { width: 1, height: 2, max: 100 });
  expect([t2, b2]).toEqual(["⠀", "⣿"]);
});

test("ASCII chart for terminals without braille", () => {
  expect(areaChart([0, 50, 100], { width: 3, height: 2, max: 100, ascii: true })).toEqual(["  #", " ##"]);
});

test("bars", () => {
  expect(bar(0.5, 10, true)).toBe("#####.....");
  expect(bar(2, 4)).toBe("████");
  expect(bar(Number.NaN, 3, true)).toBe("...");
});

test("sparse buckets on a uniform time axis: memory carries forward between events", () => {
  const b = [
    { start_us: 0, max: 5, last: 4 },
    { start_us: 90, max: 9, last: 2 },
  ];
  expect(onTimeAxis(b, 0, 100, 10)).toEqual([5, 4, 4, 4, 4, 4, 4, 4, 4, 9]);
});

describe("what the Process chart draws besides its curves", () => {
  test("a line series over an area: its dots show above the area, nothing is drawn where it is NaN", () => {
    const area = [10, 10, 10, 10];
    const plain = areaChart(area, { width: 2, height: 2, max: 40 });
    const withLine = areaChart(area, { width: 2, height: 2, max: 40, line: [40, 40, Number.NaN, Number.NaN] });
    // The line at the top (level 8 of 8) sets the top dots of the first cell only.
    expect(withLine[0]![0]).not.toBe(plain[0]![0]);
    expect(withLine[0]![1]).toBe(plain[0]![1]);
    expect(withLine[1]).toBe(plain[1]);
    const ascii = areaChart([10, 10], { width: 2, height: 2, max: 40, ascii: true, line: [40, Number.NaN] });
    expect(ascii).toEqual(["- ", "::"]);
  });

  test("phase runs: a letter where a phase begins, a rule while it lasts, blank where nothing happened", () => {
    const runs = phaseRuns(Int8Array.from([-1, 1, 1, 1, 2, 2, 3, 0]), true);
    expect(runs.map((r) => r.text).join("")).toBe(" F--B-Oo");
    expect(runs.map((r) => r.phase)).toEqual([-1, 1, 2, 3, 0]);
    expect(phaseRuns(Int8Array.from([2, 2, 2])).map((r) => r.text).join("")).toBe("B━━");
  });

  test("marks: label after the mark, or before it at the right edge; a colliding label gives way", () => {
    expect(markLine(20, [{ column: 2, mark: "^", label: "max 1 GiB" }])).toBe("  ^ max 1 GiB       ");
    expect(markLine(12, [{ column: 10, mark: "X", label: "OOM" }])).toBe("      OOM X ");
    expect(markLine(12, [{ column: 10, mark: "X", label: "OOM" }, { column: 11, mark: "^", label: "max" }])).toBe("      OOM X^");
    expect(markLine(12, [{ column: 10, mark: "X", label: "OOM" }, { column: 7, mark: "^", label: "max" }])).toBe("      OOM X ");
    expect(markLine(5, [{ column: 9, mark: "^", label: "x" }])).toBe("     ");
  });
});
