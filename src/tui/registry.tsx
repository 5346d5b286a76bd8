// Every screen, in one list: its id, its title, the component that draws it, and (where it has a
// selection) how many rows it selects among. A screen's key is its place in the list, so a new
// screen is one file and one line here; the tabs, the help, the number keys and the hints that
// name screens ("2 Process") all read this list.
import type { ReactElement } from "react";
import type { ProcessModel } from "../collect/live";
import type { Controller } from "./controller";
import type { UiState } from "./ui-state";
import { HelpScreen } from "./screens/help";
import { LinesScreen } from "./screens/lines";
import { Overview, overviewProcesses } from "./screens/overview";
import { ProcessScreen } from "./screens/process";
import { SegmentsScreen } from "./screens/segments";
import { TensorsScreen } from "./screens/tensors";

/** What every screen is drawn from. */
export interface ScreenProps {
  ctl: Controller;
  /** The process the per-process screens show. */
  pm: ProcessModel | undefined;
  ui: UiState;
  /** This screen's selected row. */
  selected: number;
  width: number;
  height: number;
  ascii: boolean;
  /** "2 Process, 3 Tensors and 4 Segments": how to reach screens, by id. */
  keyHint: (ids: ScreenId[]) => string;
  /** Every screen's key and title, for the help. */
  screens: readonly { key: string; title: string }[];
}

interface ScreenSpec {
  id: string;
  title: string;
  component: (p: ScreenProps) => ReactElement;
  /** How many rows the selection moves over (absent: the screen has no selection). */
  rows?: (p: ScreenProps) => number;
}

const LIST = [
  {
    id: "overview",
    title: "Overview",
    component: (p) => (
      <Overview doc={p.ctl.doc} history={p.ctl.history} width={p.width} height={p.height} selected={p.selected} sort={p.ui.procSort} filter={p.ui.filter} ascii={p.ascii}
        replay={p.ctl.replay ? `The ${p.ctl.replay.title}` : null} sampling={p.ctl.collector !== null} replayHint={p.keyHint(["process", "tensors", "segments"])} replayAt={p.keyHint(["process"])} />
    ),
    rows: (p) => overviewProcesses(p.ctl.doc, p.ui.procSort, p.ui.filter).length,
  },
  { id: "process", title: "Process", component: (p) => <ProcessScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} /> },
  {
    id: "tensors",
    title: "Tensors",
    component: (p) => <TensorsScreen pm={p.pm} width={p.width} height={p.height} sort={p.ui.tensorSort} filter={p.ui.filter} selected={p.selected} />,
  },
  { id: "segments", title: "Segments", component: (p) => <SegmentsScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} /> },
  { id: "lines", title: "Lines", component: (p) => <LinesScreen pm={p.pm} state={p.pm ? p.ctl.lines.get(p.pm.pid) : undefined} width={p.width} height={p.height} /> },
  { id: "help", title: "Help", component: (p) => <HelpScreen screens={p.screens} /> },
] as const satisfies readonly ScreenSpec[];

export type ScreenId = (typeof LIST)[number]["id"];

export interface Screen extends ScreenSpec {
  id: ScreenId;
  /** The key that shows it: its place in the list, from 1. */
  key: string;
}

export const SCREENS: readonly Screen[] = LIST.map((s, i) => ({ ...s, key: String(i + 1) }));

export function screenIndex(id: ScreenId): number {
  return SCREENS.findIndex((s) => s.id === id);
}

/** "2 Process, 3 Tensors and 4 Segments". */
export function keyHint(ids: ScreenId[]): string {
  const named = ids.map((id) => SCREENS[screenIndex(id)]!).map((s) => `${s.key} ${s.title}`);
  return named.length > 1 ? `${named.slice(0, -1).join(", ")} and ${named.at(-1)}` : (named[0] ?? "");
}
