"""Train a transformer MLP stack with nn.Linear and with TiledLinear under DDP, FSDP2 and tensor parallel.

    torchrun --nproc-per-node 2 examples/train_distributed.py                  # GPUs, NCCL, all modes
    torchrun --nproc-per-node 2 examples/train_distributed.py --backend gloo   # CPU
    torchrun --nproc-per-node 2 examples/train_distributed.py --mode tp --dtype bf16 --steps 30

For each mode the same model (same seed, same data) is trained twice: the
nn.Linear baseline, then with every Linear swapped for TiledLinear
(torch_tiled_gemm.swap_linear).  Everything distributed is PyTorch's own:

    ddp    DistributedDataParallel; each rank trains on its slice of the batch
    fsdp2  torch.distributed.fsdp.fully_shard per block and at the root
    tp     parallelize_module with ColwiseParallel (up) / RowwiseParallel (down),
           the plan from torch_tiled_gemm.distributed.tensor_parallel_plan;
           every rank sees the whole batch

Rank 0 prints, per mode and model: first and last loss, median step time
(after warm-up; forward + backward + optimizer step) and time relative to
nn.Linear.  A mode that raises is reported (which mode, which model, the
traceback) and the script goes on with the next; it exits with status 1 if
any mode failed.

The optimizer gets its parameters through
torch_tiled_gemm.distributed.optimizer_param_groups: under tensor parallel
the Linears' parameters are DTensors and the LayerNorms' plain tensors, and
torch's foreach optimizer kernels (the default on CUDA) refuse a group that
mixes the two.
"""
import argparse
import os
import statistics
import sys
import time
import traceback

# NVLink SHARP / multicast off (before torch / NCCL initialise).
os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402

try:
    import torch_tiled_gemm as ttg
except ImportError:  # run from a checkout without `pip install -e .`
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import torch_tiled_gemm as ttg
import torch_tiled_gemm.distributed as tdist  # noqa: E402  (DTensor sharding rule for tiled::gemm)


class Block(nn.Module):
    """Pre-norm transformer MLP block: x + down(gelu(up(norm(x))))."""

    def __init__(self, d, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, hidden)
        self.down = nn.Linear(hidden, d)

    def forward(self, x):
        return x + self.down(nn.functional.gelu(self.up(self.norm(x)), approximate="tanh"))


class MLPStack(nn.Module):
    def __init__(self, d, hidden, depth):
        super().__init__()
        self.blocks = nn.ModuleList(Block(d, hidden) for _ in range(depth))

    def forward(self, x):
        for blk in self.blocks:
            x = blk(x)
        return x


def build(args, device, tiled, mode, mesh):
    torch.manual_seed(0)
    model = MLPStack(args.d_model, args.hidden, args.depth).to(device)
    if tiled:
        ttg.swap_linear(model)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if mode == "fsdp2":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:  # torch < 2.6
            from torch.distributed._composable.fsdp import fully_shard
        for blk in model.blocks:
            fully_shard(blk, mesh=mesh)
        return fully_shard(model, mesh=mesh)
    if mode == "tp":
        from torch.distributed.tensor.parallel import parallelize_module

        return parallelize_module(model, mesh, tdist.tensor_parallel_plan(model))
    raise ValueError(mode)


def data(args, device, step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(args.batch, args.seq, args.d_model, generator=g).to(device)
    return x, 0.5 * x  # a target the model can learn


def run(args, device, mode, tiled, mesh):
    rank, world = dist.get_rank(), dist.get_world_size()
    model = build(args, device, tiled, mode, mesh)
    # One parameter group per kind (DTensor / plain tensor): see the module docstring.
    opt = torch.optim.AdamW(tdist.optimizer_param_groups(model), lr=args.lr)
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=args.dtype == "bf16")
    losses, times = [], []
    for step in range(args.warmup + args.steps):
        x, y = data(args, device, step)
        if mode in ("ddp", "fsdp2"):  # data parallel: each rank its slice of the global batch
            x, y = x.chunk(world)[rank], y.chunk(world)[rank]
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        with autocast:
            out = model(x)
        loss = nn.functional.mse_loss(out.float(), y)
        loss.backward()
        opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        if step >= args.warmup:
            times.append(time.perf_counter() - t0)
        loss = loss.detach()
        if mode in ("ddp", "fsdp2"):
            dist.all_reduce(loss)
            loss /= world
        losses.append(loss.item())
    # The slowest rank sets the pace.
    t = torch.tensor([statistics.median(times)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return losses, t.item() * 1e3


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mode", choices=["ddp", "fsdp2", "tp", "all"], default="all")
    p.add_argument("--backend", choices=["nccl", "gloo"], default="nccl" if torch.cuda.is_available() else "gloo")
    p.add_argument("--dtype", choices=["fp32", "bf16"], default=None,
                   help="bf16 = autocast (default on GPU); fp32 = strict fp32 (default on CPU)")
    p.add_argument("--steps", type=int, default=None, help="timed steps (default 20 GPU / 5 CPU)")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--d-model", type=int, default=None)
    p.add_argument("--hidden", type=int, default=None)
    p.add_argument("--depth", type=int, default=None)
    p.add_argument("--batch", type=int, default=8, help="global batch (sequences)")
    p.add_argument("--seq", type=int, default=None)
    p.add_argument("--lr", type=float, default=1e-4)  # 1e-3 diverges at the GPU sizes (d 2048, hidden 8192)
    args = p.parse_args()
    gpu = args.backend == "nccl"
    # GPU defaults: 4 blocks of 2048 -> 8192 -> 2048, 8 x 512 tokens.  CPU: small.
    for name, g, c in (("dtype", "bf16", "fp32"), ("steps", 20, 5), ("d_model", 2048, 128), ("hidden", 8192, 512),
                       ("depth", 4, 2), ("seq", 512, 32)):
        if getattr(args, name) is None:
            setattr(args, name, g if gpu else c)

    if gpu:
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
        torch.backends.cuda.matmul.allow_tf32 = False  # strict fp32 for both models when --dtype fp32
    else:
        device = torch.device("cpu")
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // int(os.environ.get("LOCAL_WORLD_SIZE", 1))))
    dist.init_process_group(args.backend, device_id=device if gpu else None)
    rank, world = dist.get_rank(), dist.get_world_size()
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(device.type, (world,))
    if rank == 0:
        print(f"world {world}, backend {args.backend}, torch {torch.__version__}, "
              f"{torch.cuda.get_device_name(device) if gpu else 'CPU'}; {args.depth} blocks "
              f"{args.d_model}->{args.hidden}->{args.d_model}, global batch {args.batch}x{args.seq}, "
              f"{args.dtype}, {args.steps} timed steps after {args.warmup} warm-up", flush=True)

    modes = ["ddp", "fsdp2", "tp"] if args.mode == "all" else [args.mode]
    rows, failed = [], []
    for mode in modes:
        results = {}
        for name, tiled in (("nn.Linear", False), ("TiledLinear", True)):
            try:
                results[name] = run(args, device, mode, tiled, mesh)
            except Exception:
                failed.append(f"{mode}/{name}")
                if rank == 0:
                    print(f"{mode:6s} {name}: FAILED on rank {rank}\n{traceback.format_exc()}", flush=True)
                else:
                    print(f"{mode:6s} {name}: FAILED on rank {rank}: {traceback.format_exc().splitlines()[-1]}",
                          flush=True)
                break  # the other model of this mode would not be comparable
        if len(results) < 2:
            if device.type == "cuda":
                torch.cuda.empty_cache()
            continue
        (base_losses, base_ms), (ours_losses, ours_ms) = results["nn.Linear"], results["TiledLinear"]
        diff = max(abs(a - b) for a, b in zip(base_losses, ours_losses))
        rows.append((mode, "nn.Linear", base_losses, base_ms, 1.0, None))
        rows.append((mode, "TiledLinear", ours_losses, ours_ms, ours_ms / base_ms, diff))
        if rank == 0:
            print(f"{mode:6s} nn.Linear   loss {base_losses[0]:.5f} -> {base_losses[-1]:.5f}  step {base_ms:8.2f} ms\n"
                  f"{mode:6s} TiledLinear loss {ours_losses[0]:.5f} -> {ours_losses[-1]:.5f}  step {ours_ms:8.2f} ms"
                  f"  ({ours_ms / base_ms:.2f}x nn.Linear; max |loss diff| {diff:.2e})", flush=True)
    if rank == 0:
        print("\n| mode | model | first loss | last loss | step ms (median) | vs nn.Linear | max loss diff |")
        print("|---|---|---:|---:|---:|---:|---:|")
        for mode, name, losses, ms, rel, diff in rows:
            print(f"| {mode} | {name} | {losses[0]:.5f} | {losses[-1]:.5f} | {ms:.2f} | {rel:.2f}x | "
                  f"{'' if diff is None else f'{diff:.1e}'} |")
        if failed:
            print(f"\nFAILED: {', '.join(failed)}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    if failed:
        sys.exit(1)


if __name__ == "__main__":
    main()
