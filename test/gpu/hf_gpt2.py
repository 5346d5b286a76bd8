"""Train a GPT-2 language model (Hugging Face transformers) from scratch on random tokens, at full
speed, for a while: the kind of program a user points the monitor at.

    python3 test/gpu/hf_gpt2.py --seconds 60 [--batch 8 --seq 256] [--facts F.jsonl]
    python3 test/gpu/hf_gpt2.py --leak --seconds 30           # keeps a bit of every step's logits
    python3 test/gpu/hf_gpt2.py --oom-after 10 --seconds 20   # asks for 16 TiB once, then a few steps
    torchrun --standalone --nproc_per_node 2 test/gpu/hf_gpt2.py --ddp --seconds 60 --facts F.jsonl
    torchrun ... test/gpu/hf_gpt2.py --ddp --batch-per-rank 8,12   # rank 1 peaks above rank 0

The model is built from a config (no download). AdamW, zero_grad(set_to_none=True), and the
user's own record_function ranges "data" and "train_step" (PyTorch adds its own, such as
"Optimizer.step#AdamW.step").

--facts F: one JSON line per completed step, written right after optimizer.step() and before
zero_grad(): {"step": n (optimizer steps done), "memory_allocated", "memory_reserved",
"requested_bytes", "max_memory_allocated", "num_alloc", "time" (unix seconds), "device"}, all from
one torch.cuda.memory_stats() call (memory_allocated() is its allocated_bytes.all.current). An OOM
asked for by --oom-after adds {"oom": true, "step", "num_ooms", "time", "device"}; at exit a last line
{"final": true, "steps", ...the same figures, "pid", "rank", "world_size", "seconds", ...}. With
--ddp, F gets ".rank{RANK}" appended. Everything stays alive until the interpreter exits, so the
final line's figures are the allocator's at exit.
"""
import argparse
import json
import os
import signal
import sys
import time

import torch
import transformers
from torch.profiler import record_function
from transformers import GPT2Config, GPT2LMHeadModel

ap = argparse.ArgumentParser(description="Train a GPT-2 from scratch on random tokens for a while.")
ap.add_argument("--seconds", type=float, default=60, help="train at full speed until this many seconds have passed (from the first step)")
ap.add_argument("--batch", type=int, default=8)
ap.add_argument("--seq", type=int, default=256)
ap.add_argument("--layers", type=int, default=6)
ap.add_argument("--embd", type=int, default=512)
ap.add_argument("--heads", type=int, default=8)
ap.add_argument("--vocab", type=int, default=50257)
ap.add_argument("--lr", type=float, default=3e-4)
ap.add_argument("--facts", help="JSONL file: torch's own figures after every optimizer step")
ap.add_argument("--leak", action="store_true", help="keep every step's last-position logits on the GPU (memory grows every step)")
ap.add_argument("--oom-after", type=float, help="after this many seconds ask for 16 TiB once (caught), train 5 more steps, exit")
ap.add_argument("--ddp", action="store_true", help="DistributedDataParallel over NCCL (under torchrun)")
ap.add_argument("--batch-per-rank", help="under --ddp, each rank's batch, comma separated (e.g. 8,12: rank 1 peaks above rank 0)")
args = ap.parse_args()

rank, world_size = 0, 1
if args.ddp:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    dev = torch.device("cuda", local_rank)
    torch.cuda.set_device(dev)
    dist.init_process_group("nccl", device_id=dev)
    rank, world_size = dist.get_rank(), dist.get_world_size()
else:
    dev = torch.device("cuda", 0)

if args.batch_per_rank:
    sizes = [int(b) for b in args.batch_per_rank.split(",")]
    args.batch = sizes[rank % len(sizes)]
torch.manual_seed(rank)
torch.set_float32_matmul_precision("high")
config = GPT2Config(vocab_size=args.vocab, n_positions=max(256, args.seq), n_embd=args.embd, n_layer=args.layers, n_head=args.heads)
model = GPT2LMHeadModel(config).to(dev)
model.train()
n_params = sum(p.numel() for p in model.parameters())
opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
if args.ddp:
    model = DistributedDataParallel(model, device_ids=[dev.index])

facts_path = args.facts + (".rank%d" % rank if args.ddp else "") if args.facts else None
facts = open(facts_path, "w", buffering=1) if facts_path else None  # a line at a time


def figures():
    s = torch.cuda.memory_stats(dev)  # one call: memory_allocated() etc. each cost as much
    return {
        "memory_allocated": s.get("allocated_bytes.all.current", 0),
        "memory_reserved": s.get("reserved_bytes.all.current", 0),
        "requested_bytes": s.get("requested_bytes.all.current", 0),
        "max_memory_allocated": s.get("allocated_bytes.all.peak", 0),
        "num_alloc": s.get("allocation.all.allocated", 0),
        "time": time.time(),
        "device": dev.index,
    }


def fact(line):
    if facts:
        facts.write(json.dumps(line) + "\n")


stop = {"now": False}
if not args.ddp:  # under DDP every rank must stop at the same step: see the all_reduce below
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__("now", True))
print("hf_gpt2 pid %d rank %d/%d device %s torch %s transformers %s params %d batch %d seq %d"
      % (os.getpid(), rank, world_size, dev, torch.__version__, transformers.__version__, n_params, args.batch, args.seq), flush=True)

kept = []  # --leak
step = 0
oom_done = False
last_step = None
start = time.time()
end = start + args.seconds
next_print = start + 5
while True:
    with record_function("data"):
        ids = torch.randint(0, args.vocab, (args.batch, args.seq), device=dev)
    with record_function("train_step"):
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        step += 1
        if facts:
            fact(dict(step=step, **figures()))
        opt.zero_grad(set_to_none=True)
    if args.leak:
        kept.append(out.logits[:, -1].detach().clone())  # "for later": the next-token logits of every step
    now = time.time()
    if now >= next_print:
        next_print = now + 5
        print("step %d loss %.4f steps/s %.1f allocated %d reserved %d"
              % (step, out.loss.item(), step / (now - start), torch.cuda.memory_allocated(dev), torch.cuda.memory_reserved(dev)), flush=True)
    if args.oom_after is not None and not oom_done and now >= start + args.oom_after:
        oom_done = True
        try:
            torch.empty(2**44, dtype=torch.uint8, device=dev)  # 16 TiB
            fact({"oom": False, "step": step, "time": time.time(), "device": dev.index})
            print("oom not raised", flush=True)
        except torch.OutOfMemoryError:
            num_ooms = torch.cuda.memory_stats(dev).get("num_ooms", 0)
            fact({"oom": True, "step": step, "num_ooms": num_ooms, "time": time.time(), "device": dev.index})
            print("oom raised num_ooms %d" % num_ooms, flush=True)
        last_step = step + 5
    if args.ddp:
        if step % 10 == 0:
            flag = torch.tensor([1 if time.time() >= end else 0], device=dev)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            if flag.item():
                break
    elif now >= end or stop["now"] or (last_step is not None and step >= last_step):
        break

torch.cuda.synchronize(dev)
elapsed = time.time() - start
if args.ddp:
    dist.destroy_process_group()
final = dict(final=True, steps=step, **figures())
final.update(pid=os.getpid(), rank=rank, world_size=world_size, seconds=round(elapsed, 3), steps_per_second=round(step / elapsed, 2),
             params=n_params, batch=args.batch, seq=args.seq, torch=torch.__version__, transformers=transformers.__version__)
fact(final)
if facts:
    facts.close()
print("done %d steps in %.1f s (%.1f steps/s); allocated %d reserved %d"
      % (step, elapsed, step / elapsed, final["memory_allocated"], final["memory_reserved"]), flush=True)
sys.stdout.flush()
# Nothing is freed before exit: the model, the optimizer, the last step's tensors and the agent's
# final totals (taken at exit) agree with the final line.
