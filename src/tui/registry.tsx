// Every screen, in one list: its id, its title, the component that draws it, and (where it has a
// selection) how many rows it selects among. A screen's key is its place in the list, so a new
// screen is one file and one line here; the tabs, the help, the number keys and the hints that
// name screens ("2 Process") all read this list.
import type { ReactElement } from "react";
import type { ProcessModel } from "../collect/live";
import type { Controller } from "./controller";
import type { UiState } from "./ui-state";
import { findingAt, FindingsScreen, processFindings } from "./screens/findings";
import { HelpScreen } from "./screens/help";
import { LinesScreen } from "./screens/lines";
import { Overview, overviewLayout, overviewProcesses, overviewRowAt } from "./screens/overview";
import { sortAtColumn } from "./screens/process-table";
import { ProcessScreen } from "./screens/process";
import { segmentPartAt, segmentPartCount, SegmentView } from "./screens/segment-view";
import { segmentRowAt, SegmentsScreen, segmentsInOrder } from "./screens/segments";
import { tensorRowAt, TensorsScreen, tensorSortAt, tensorsLayout } from "./screens/tensors";

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
  /** The row under line `line` of the screen (from 0), for a mouse click. */
  rowAt?: (p: ScreenProps, line: number) => number | null;
  /** The sort a click at column `x` (from 1) of line `line` chooses. */
  sortAt?: (p: ScreenProps, line: number, x: number) => string | null;
}

const LIST = [
  {
    id: "overview",
    title: "Overview",
    component: (p) => {
      const { doc, history } = p.ctl.overview();
      return (
        <Overview doc={doc} history={history} width={p.width} height={p.height} selected={p.selected} sort={p.ui.procSort} reverse={p.ui.procReverse} filter={p.ui.filter} ascii={p.ascii}
          replay={p.ctl.replay ? `The ${p.ctl.replay.title}` : null} sampling={p.ctl.collector !== null} replayHint={p.keyHint(["process", "tensors", "segments"])} replayAt={p.keyHint(["process"])} />
      );
    },
    rows: (p) => overviewProcesses(p.ctl.overview().doc, p.ui.procSort, p.ui.filter, p.ui.procReverse).length,
    rowAt: (p, line) => {
      const { doc, history } = p.ctl.overview();
      return overviewRowAt(doc, history, p.width, p.height, p.selected, p.ui.procSort, p.ui.procReverse, p.ui.filter, line);
    },
    sortAt: (p, line, x) => {
      const { doc, history } = p.ctl.overview();
      if (!doc) return null;
      const l = overviewLayout(doc, history, p.width, p.height, p.selected, p.ui.procSort, p.ui.procReverse, p.ui.filter);
      return line === l.headerLine ? sortAtColumn(l.cols, x) : null;
    },
  },
  { id: "process", title: "Process", component: (p) => <ProcessScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} /> },
  {
    id: "tensors",
    title: "Tensors",
    component: (p) => <TensorsScreen pm={p.pm} width={p.width} height={p.height} sort={p.ui.tensorSort} reverse={p.ui.tensorReverse} filter={p.ui.filter} selected={p.selected} />,
    rows: (p) => (p.pm && p.pm.model.devices.length ? tensorsLayout(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected).rows.length : 0),
    rowAt: (p, line) => tensorRowAt(p.pm, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, line),
    sortAt: (p, line, x) => tensorSortAt(p.pm, p.width, p.height, p.ui.tensorSort, p.ui.tensorReverse, p.ui.filter, p.selected, line, x),
  },
  {
    id: "segments",
    title: "Segments",
    // The list, or one segment opened with Enter (its blocks; Esc goes back).
    component: (p) =>
      p.ui.segment && p.pm ? (
        <SegmentView pm={p.pm} address={p.ui.segment.address} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} />
      ) : (
        <SegmentsScreen pm={p.pm} width={p.width} height={p.height} ascii={p.ascii} selected={p.selected} />
      ),
    rows: (p) => (p.ui.segment && p.pm ? segmentPartCount(p.pm, p.ui.segment.address) : segmentsInOrder(p.pm).length),
    rowAt: (p, line) =>
      p.ui.segment && p.pm ? segmentPartAt(p.pm, p.ui.segment.address, p.height, p.selected, line) : segmentRowAt(segmentsInOrder(p.pm).length, p.height, p.selected, line),
  },
  { id: "lines", title: "Lines", component: (p) => <LinesScreen pm={p.pm} width={p.width} height={p.height} /> },
  {
    id: "findings",
    title: "Findings",
    component: (p) => <FindingsScreen pm={p.pm} width={p.width} height={p.height} selected={p.selected} open={p.ui.openFinding} />,
    rows: (p) => processFindings(p.pm).length,
    rowAt: (p, line) => findingAt(p.pm, p.width, p.height, p.selected, p.ui.openFinding, line),
  },
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
