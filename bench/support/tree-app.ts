// A tree's screens as the screen benchmarks drive them (bench/overview-redraw.tsx,
// bench/tui-idle-loop.tsx): Ink, React, the App and its Controller from that tree's own sources and
// dependencies, and the recorded H100 machine state both draw from.
import { join } from "node:path";

export async function treeApp(tree: string) {
  const { render } = await import(Bun.resolveSync("ink", join(tree, "src")));
  const React = await import(Bun.resolveSync("react", join(tree, "src")));
  const { App } = await import(join(tree, "src/tui/app"));
  const { Controller } = await import(join(tree, "src/tui/controller"));
  const recorded = (await import(join(tree, "test/fixtures/h100-training.json"))).default;
  return { render, React, App, Controller, recorded };
}
