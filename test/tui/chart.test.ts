// Text charts: what a user reads off them.
import { expect, test } from "bun:test";
import { areaChart, bar, onTimeAxis, resample } from "../../src/tui/chart";

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
