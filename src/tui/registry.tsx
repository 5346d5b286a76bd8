// Every screen, in one list, one line each. A screen's file (src/tui/screens/) exports its
// ScreenSpec (src/tui/screen-spec.ts): its id, its key (named there, not given by its place here),
// its title, what it draws from the store's state, and where it has them, what it selects, sorts
// and the keys it takes. The tabs show the screens in this order; the tab line, the help's list of
// screens, the number keys and the hints that name screens ("2 Process") read this list; the keys
// every screen shares (src/tui/keymap.ts) name the Overview and Help by id. A choice a screen keeps
// beyond its selected row (a sort, an opened item) is a field of UiState (src/tui/ui-state.ts).
// test/tui/registry.test.ts fails when a screen's file is left out of the list.
import { findingsScreen } from "./screens/findings";
import { helpScreen } from "./screens/help";
import { linesScreen } from "./screens/lines";
import { overviewScreen } from "./screens/overview";
import { processScreen } from "./screens/process";
import { segmentsScreen } from "./screens/segments";
import { tensorsScreen } from "./screens/tensors";
import { timelineScreen } from "./screens/timeline";
import type { ScreenSpec } from "./screen-spec";

export type { ScreenProps } from "./screen-spec";

const LIST = [overviewScreen, processScreen, tensorsScreen, segmentsScreen, linesScreen, findingsScreen, helpScreen, timelineScreen] as const;

export type ScreenId = (typeof LIST)[number]["id"];

export interface Screen extends ScreenSpec {
  id: ScreenId;
}

export const SCREENS: readonly Screen[] = LIST;

export function screenIndex(id: ScreenId): number {
  return SCREENS.findIndex((s) => s.id === id);
}

/** "2 Process, 3 Tensors and 4 Segments". */
export function keyHint(ids: ScreenId[]): string {
  const named = ids.map((id) => SCREENS[screenIndex(id)]!).map((s) => `${s.key} ${s.title}`);
  return named.length > 1 ? `${named.slice(0, -1).join(", ")} and ${named.at(-1)}` : (named[0] ?? "");
}
