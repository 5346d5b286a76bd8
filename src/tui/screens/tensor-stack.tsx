// One block's stack on the Tensors screen (Enter on a block where stacks were recorded): where it
// was allocated, every frame innermost first as PyTorch lists them, the user's line marked and the
// library frames dimmed, as memory_viz shows a block's stack. Esc goes back to the table.
import { Box, Text } from "ink";
import type { ProcessModel } from "../../collect/live";
import { blocks, type BlockLine } from "../../profiler";
import { frameKind, frameLabel, type Frame } from "../../profiler/user-frame";
import { color, formatBytes, pad } from "../format";
import { firstShown } from "./scroll";
import { cutStart, nameCell } from "./tensor-table";

/** The block at `address` on the screen's device, its stack and user frame (−1: none). */
export function openedStack(pm: ProcessModel, address: number): { block: BlockLine | undefined; frames: readonly Frame[]; user: number } {
  const view = blocks(pm.model, { sort: "address", limit: Infinity });
  const block = view.blocks.find((b) => b.address === address);
  const stacks = pm.model.stacks;
  // The block's own stack (from its alloc in a replayed trace), else the snapshot's end state's.
  const stack = stacks ? block?.stack || stacks.stackOf(view.device, address) : 0;
  return { block, frames: stacks && stack ? stacks.frames(stack) : [], user: stacks && stack ? stacks.userFrame(stack) : -1 };
}

/** Lines above the frames: the title, the block, the frames' heading. */
const TOP = 3;
const framesRoom = (height: number) => Math.max(3, height - TOP - 1);

export function TensorStack({ pm, address, width, height, selected }: { pm: ProcessModel; address: number; width: number; height: number; selected: number }) {
  const { block, frames, user } = openedStack(pm, address);
  if (!block) return <Text dimColor>That block is gone (freed since). Esc: back to the table.</Text>;
  const room = framesRoom(height);
  const first = firstShown(frames.length, room, selected);
  const title = frames.length === 0 ? "No frames were recorded for this block" : user >= 0 ? `Allocated at ${frameLabel(frames[user]!)}` : "Allocated in library code only: no frame of the user's code";
  const about = `${formatBytes(block.size_bytes)}, ${block.category}, ${nameCell(block)}`;
  const heading =
    frames.length === 0
      ? "It was allocated before the recording began, or on a thread with no Python (autograd's backward) under stacks=\"python\"."
      : `${frames.length} frames, innermost first; ▶ the first outside torch, Python's library and site-packages (GPUMEM_TUI_LIBRARY, GPUMEM_TUI_USER_CODE change what counts)`;
  return (
    <Box flexDirection="column">
      <Text bold wrap="truncate-end">{pad(title, width - 1)}</Text>
      <Text wrap="truncate-end">{pad(about, width - 1)}</Text>
      <Text dimColor wrap="truncate-end">{pad(heading, width - 1)}</Text>
      {frames.slice(first, first + room).map((f, i) => {
        const k = first + i;
        const mark = k === user ? "▶" : " ";
        const text = `${mark}${pad(String(k), 4, true)}  ${cutStart(frameLabel(f), width - 8)}`;
        // inside the user frame: library code by the rule that chose it; outside it, by the defaults
        const library = k !== user && (k < user || user < 0 || frameKind(f.file) !== "user");
        return (
          <Text key={k} inverse={k === selected} bold={k === user} dimColor={library} color={k === user ? color("cyan") : undefined}>
            {pad(text, width - 1)}
          </Text>
        );
      })}
      <Text dimColor>{pad("Esc: back to the table  ↑ ↓: the frames", width - 1)}</Text>
    </Box>
  );
}

/** How many frames the opened block's stack has (the rows the selection moves over). */
export function stackRows(pm: ProcessModel, address: number): number {
  return openedStack(pm, address).frames.length;
}
