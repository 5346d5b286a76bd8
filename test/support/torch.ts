// A Python with torch, for tests of what torch's own code does with ours (torch.cuda._memory_viz,
// the agent on a torch without CUDA): python3 where it has torch (the GPU machine), or the one in
// $GPUMEM_TORCH_PYTHON (a CPU build of torch is enough). null where there is none: those tests skip.
export const TORCH_PYTHON_HINT = "needs a Python with torch: python3, or GPUMEM_TORCH_PYTHON=/path/to/python";

export function torchPython(): string | null {
  for (const py of [process.env.GPUMEM_TORCH_PYTHON, "python3"]) {
    if (py && Bun.spawnSync([py, "-c", "import torch"], { stdout: "ignore", stderr: "ignore" }).exitCode === 0) return py;
  }
  return null;
}
