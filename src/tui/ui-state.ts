// What the user has chosen on the screens (which screen, selections, sorts, the filter, a prompt):
// one object that the keys change in order, so that several keys in one read each see what the
// key before left.
import type { ProcessSort } from "./screens/process-table";
import type { TensorSort } from "./screens/tensor-table";

/** A question on the status line that the next key answers. */
export type Prompt =
  | { kind: "empty_cache"; pid: number }
  | { kind: "attach"; pid: number; label: string }
  | { kind: "kill_signal"; pid: number; label: string; command: string | null }
  | { kind: "kill_confirm"; pid: number; label: string; command: string | null; signal: "SIGTERM" | "SIGKILL" };

export interface UiState {
  /** Index into SCREENS (src/tui/registry.tsx). */
  screen: number;
  /** The screen `?` left for Help, where `?` or Esc goes back to. */
  back: number | null;
  /** The selected row, per screen. */
  selected: number[];
  /** The process the Process, Tensors, Segments, Lines and Findings screens show. */
  pid: number | null;
  procSort: ProcessSort;
  procReverse: boolean;
  tensorSort: TensorSort;
  tensorReverse: boolean;
  /** The groups of alike blocks opened with Enter on the Tensors screen (their keys). */
  tensorOpen: string[];
  filter: string;
  typing: boolean;
  prompt: Prompt | null;
  /** The finding opened with Enter on the Findings screen (its index there), or null. */
  openFinding: number | null;
  /** The segment opened with Enter on the Segments screen (its address), and the list's
   *  selection that Esc goes back to; null: the list. */
  segment: { address: number; listSelected: number } | null;
}

export function newUiState(screen: number, screens: number): UiState {
  return {
    screen,
    back: null,
    selected: new Array(screens).fill(0),
    pid: null,
    procSort: "memory",
    procReverse: false,
    tensorSort: "size",
    tensorReverse: false,
    tensorOpen: [],
    filter: "",
    typing: false,
    prompt: null,
    openFinding: null,
    segment: null,
  };
}
