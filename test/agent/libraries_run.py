"""The real agent on the torch, torch.distributed and hook doubles (torch_double.py, dist_double.py,
test/support/hook_double.c) through one rank's process-group life: its ring holds the library marks
(test/agent/libraries.test.ts).

    GPUMEM_TEST_HOOK_DOUBLE=LIB GPUMEM_TUI_DIR=DIR python3 test/agent/libraries_run.py OUT.ring

Saves OUT.ring and OUT.json (gpumem_agent.save_ring) and prints one JSON line: the marks the agent
counted and its notes.
"""
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "agent"))
import torch_double  # noqa: E402
import dist_double  # noqa: E402

torch = torch_double.install()
dist = dist_double.install(torch)

import gpumem_agent  # noqa: E402


agent = torch_double.start_agent_on_doubles(torch)
x = torch.empty(64, 256)
dist.init_process_group("nccl")
for _ in range(3):
    with torch.profiler.record_function("train_step"):
        dist.all_reduce(x)
g = dist.new_group([0])
dist.all_reduce(x, group=g)
dist.all_reduce(x, group=g)
dist.destroy_process_group()
records = gpumem_agent.save_ring(sys.argv[1])
print(json.dumps({"records": records, "marks": agent.libraries.count if agent.libraries else None, "notes": agent.notes}), flush=True)
