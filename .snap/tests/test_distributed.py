"""tiled.gemm / TiledLinear under torch.distributed: DDP, FSDP2, tensor parallel (DTensor).

Every test spawns a world of 2 processes (torch.multiprocessing, file-based
rendezvous in a temporary directory: no network).  On CPU they use gloo, so CI
covers the logic; the same tests run with NCCL when 2 GPUs are visible.  Each
rank also trains the single-process nn.Linear reference on the full batch and
compares losses and parameters after a few steps.
"""
import gc
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

import torch_tiled_gemm as ttg

WORLD = 2
STEPS = 4
HAS_2_GPUS = torch.cuda.is_available() and torch.cuda.device_count() >= WORLD

pytestmark = pytest.mark.skipif(not dist.is_available(), reason="torch.distributed is not available in this build")

BACKENDS = [
    pytest.param("cpu", id="gloo-cpu"),
    pytest.param("cuda", id="nccl-cuda",
                 marks=pytest.mark.skipif(not HAS_2_GPUS, reason="needs 2 CUDA GPUs for NCCL")),
]


# ---------------------------------------------------------------------------
# harness


def _entry(rank, fn, device, init_file, args):
    torch.set_num_threads(1)  # 2 ranks on a small CI machine: no oversubscription
    if device == "cuda":
        os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
        os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        torch.cuda.set_device(rank)
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    kw = {"device_id": torch.device("cuda", rank)} if device == "cuda" else {}
    dist.init_process_group("nccl" if device == "cuda" else "gloo", init_method=f"file://{init_file}",
                            rank=rank, world_size=WORLD, **kw)
    try:
        import torch_tiled_gemm.distributed as tdist

        assert tdist.register_sharding_rules()
        fn(rank, device, *args)
        # Objects holding the process group (DDP's reducer and its gloo work
        # threads) must be gone before it is destroyed: tearing it down under
        # a live reducer aborted the rank now and then ("terminate called
        # without an active exception").
        gc.collect()
        dist.barrier()
    finally:
        gc.collect()
        dist.destroy_process_group()


def spawn(fn, device, *args):
    with tempfile.TemporaryDirectory() as d:
        mp.spawn(_entry, args=(fn, device, os.path.join(d, "rendezvous"), args), nprocs=WORLD, join=True)


def mesh_for(device):
    from torch.distributed.device_mesh import init_device_mesh

    return init_device_mesh(device, (WORLD,))


def _example_module():
    """examples/train_distributed.py: the tests train the example's own model."""
    path = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples", "train_distributed.py")
    spec = importlib.util.spec_from_file_location("train_distributed_example", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


MLPStack = _example_module().MLPStack  # pre-norm MLP blocks: x + down(gelu(up(norm(x))))


def make_model(device, tiled, seed=0):
    torch.manual_seed(seed)
    model = MLPStack(32, 64, 2).to(device)
    return ttg.swap_linear(model) if tiled else model


def make_data(device, batch=8, seq=4, d=32):
    g = torch.Generator().manual_seed(1234)
    xs = [torch.randn(batch, seq, d, generator=g).to(device) for _ in range(STEPS)]
    ys = [0.5 * x for x in xs]  # learnable: the loss falls
    return xs, ys


def train(model, xs, ys, transform=lambda t: t, params=None, foreach=None):
    """STEPS of SGD with momentum on MSE; returns the (global) losses.

    `params`: parameters or parameter groups (default model.parameters());
    `foreach`: the optimizer's (None: torch's default, foreach only on CUDA).
    """
    params = model.parameters() if params is None else params
    opt = torch.optim.SGD(params, lr=0.05, momentum=0.9, foreach=foreach)
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad(set_to_none=True)
        loss = nn.functional.mse_loss(model(transform(x)), transform(y))
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return losses


def reference_run(device):
    """The single-process nn.Linear run every mode is compared with."""
    model = make_model(device, tiled=False)
    xs, ys = make_data(device)
    losses = train(model, xs, ys)
    return [l.item() for l in losses], {k: v.detach().clone() for k, v in model.state_dict().items()}


def full(t):
    from torch.distributed.tensor import DTensor

    return t.full_tensor() if isinstance(t, DTensor) else t


def assert_params_close(model, ref_state, tol):
    state = model.state_dict()
    assert set(state) == set(ref_state)
    for k, v in state.items():
        torch.testing.assert_close(full(v).detach(), ref_state[k], rtol=tol, atol=tol, msg=lambda m: f"{k}: {m}")


def mean_over_ranks(values, device):
    t = torch.tensor(values, dtype=torch.float64, device=device)
    dist.all_reduce(t)
    return (t / WORLD).tolist()


# fp32 everywhere; the distributed runs differ from the reference only in
# summation order (gradient all-reduce, split contractions).
TOL = 2e-5


# ---------------------------------------------------------------------------
# DDP


def _ddp(rank, device):
    from torch.nn.parallel import DistributedDataParallel as DDP

    ref_losses, ref_state = reference_run(device)
    model = make_model(device, tiled=True)
    assert isinstance(model.blocks[0].up, ttg.TiledLinear)
    ddp = DDP(model, device_ids=[rank] if device == "cuda" else None)
    xs, ys = make_data(device)
    shard = lambda t: t.chunk(WORLD)[rank]  # noqa: E731  each rank trains on its half of the batch
    losses = mean_over_ranks([l.item() for l in train(ddp, xs, ys, shard)], device)
    assert losses == pytest.approx(ref_losses, rel=TOL, abs=TOL)
    assert losses[-1] < losses[0]
    assert_params_close(model, ref_state, TOL)
    # Gradients were all-reduced: every rank holds the same parameters.
    for p in model.parameters():
        gathered = [torch.empty_like(p) for _ in range(WORLD)]
        dist.all_gather(gathered, p.detach())
        torch.testing.assert_close(gathered[0], gathered[1], rtol=0, atol=0)
    del ddp


@pytest.mark.parametrize("device", BACKENDS)
def test_ddp_matches_single_process_linear(device):
    spawn(_ddp, device)


# ---------------------------------------------------------------------------
# FSDP2


def _fully_shard():
    try:
        from torch.distributed.fsdp import fully_shard  # torch >= 2.6
    except ImportError:
        from torch.distributed._composable.fsdp import fully_shard
    return fully_shard


def _fsdp(model, mesh):
    fully_shard = _fully_shard()
    for blk in model.blocks:
        fully_shard(blk, mesh=mesh)
    fully_shard(model, mesh=mesh)
    return model


def _fsdp2(rank, device, ckpt_dir):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict
    from torch.distributed.tensor import DTensor, Shard

    mesh = mesh_for(device)
    ref_losses, ref_state = reference_run(device)
    model = _fsdp(make_model(device, tiled=True), mesh)
    w = model.blocks[0].up.weight
    assert isinstance(w, DTensor) and w.placements == (Shard(0),)
    assert w.to_local().shape[0] == w.shape[0] // WORLD  # really sharded
    xs, ys = make_data(device)
    shard = lambda t: t.chunk(WORLD)[rank]  # noqa: E731
    losses = mean_over_ranks([l.item() for l in train(model, xs, ys, shard)], device)
    assert losses == pytest.approx(ref_losses, rel=TOL, abs=TOL)
    assert_params_close(model, ref_state, TOL)

    # Sharded checkpoint (DCP) of the TiledLinear model -> nn.Linear model (FSDP2, other init).
    dcp.save(model.state_dict(), checkpoint_id=os.path.join(ckpt_dir, "tiled"))
    plain = _fsdp(make_model(device, tiled=False, seed=7), mesh)
    assert not any(isinstance(m, ttg.TiledLinear) for m in plain.modules())
    state = plain.state_dict()
    dcp.load(state, checkpoint_id=os.path.join(ckpt_dir, "tiled"))
    plain.load_state_dict(state)
    assert_params_close(plain, ref_state, TOL)

    # ... and back: nn.Linear checkpoint -> TiledLinear model, as a sharded and as a full state dict.
    dcp.save(plain.state_dict(), checkpoint_id=os.path.join(ckpt_dir, "plain"))
    back = _fsdp(make_model(device, tiled=True, seed=8), mesh)
    state = back.state_dict()
    dcp.load(state, checkpoint_id=os.path.join(ckpt_dir, "plain"))
    back.load_state_dict(state)
    assert_params_close(back, ref_state, TOL)
    full_sd = get_model_state_dict(plain, options=StateDictOptions(full_state_dict=True))  # on every rank
    single = make_model("cpu", tiled=True, seed=9)  # unsharded, single-process TiledLinear model
    single.load_state_dict({k: v.cpu() for k, v in full_sd.items()})
    assert_params_close(single, {k: v.cpu() for k, v in ref_state.items()}, TOL)
    x = make_data("cpu")[0][0]
    ref_model = make_model("cpu", tiled=False)
    ref_model.load_state_dict({k: v.cpu() for k, v in ref_state.items()})
    torch.testing.assert_close(single(x), ref_model(x), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("device", BACKENDS)
def test_fsdp2_matches_single_process_linear_and_checkpoints_interchange(device, tmp_path_factory):
    ckpt = str(tmp_path_factory.mktemp("dcp"))
    spawn(_fsdp2, device, ckpt)


# ---------------------------------------------------------------------------
# Tensor parallel: the op on DTensors


def _dt(t, mesh, placement, requires_grad=True):
    from torch.distributed.tensor import distribute_tensor

    d = distribute_tensor(t.detach().clone(), mesh, [placement])
    return d.requires_grad_() if requires_grad else d


def _inner_token_shard(t):
    """Is DTensor t (>= 3-D) sharded on a token dim other than the first, e.g. Shard(1) of x [B, S, in]?"""
    return t.ndim >= 3 and any(p.is_shard() and 1 <= p.dim % t.ndim <= t.ndim - 2 for p in t.placements)


def _flattens(t):
    """Can this torch's DTensor view t as the matrix [-1, t.size(-1)]?

    The C++ backward does exactly that (as_matrix in csrc/ops.cpp): linear's
    backward flattens x and the output gradient, gemm's flattens a and the
    gradient when b is a shared 2-D matrix.  Flattening [B, S, ...] sharded on
    S is a strided sharding of the flat dim; torch 2.14's view rule supports
    it, older ones (2.11 was seen) raise "Sharding propagation failed" for
    aten.view.  Only such inner token shards are probed; the other operands
    of these tests flatten on every torch the suite has run on.
    """
    if not _inner_token_shard(t):
        return True
    try:
        t.detach().reshape(-1, t.shape[-1])
        return True
    except Exception:
        return False


def _tp_op(rank, device):
    from torch.distributed.tensor import DTensor, Partial, Replicate, Shard

    from torch_tiled_gemm.distributed import replicate_contiguous

    mesh = mesh_for(device)
    # Cases whose backward ran on the documented workaround (the sequence-
    # sharded operand redistributed to Replicate before the op) because this
    # torch's DTensor cannot flatten it; empty on torch 2.14.
    via_replicate = []
    R, P = Replicate(), Partial()
    gen = torch.Generator().manual_seed(99)

    def rnd(*shape):
        return torch.randn(*shape, generator=gen, dtype=torch.float64).to(device)

    def check(what, op, sharded, refs, ref, pout, grad_names, gather_first, tag):
        """The op on DTensors against the unsharded op: output placement and
        values, then every input's gradient.  `gather_first`: this torch's
        DTensor cannot flatten the first input in the backward, so run the
        backward on the documented workaround (replicate_contiguous)."""
        out = op(*sharded)
        assert isinstance(out, DTensor), what
        assert out.placements == (pout,), f"{what}: got {out.placements}, want {pout}"
        torch.testing.assert_close(out.full_tensor(), ref, rtol=1e-12, atol=1e-12, msg=lambda m: f"{what}: {m}")
        if gather_first:
            via_replicate.append(tag)
            out = op(replicate_contiguous(sharded[0]), *sharded[1:])
        g = rnd(*ref.shape)
        ref.backward(g)
        (out.full_tensor() * g).sum().backward()
        for name, t, r in zip(grad_names, sharded, refs):
            if t is not None:
                torch.testing.assert_close(t.grad.full_tensor(), r.grad, rtol=1e-12, atol=1e-12,
                                           msg=lambda m, name=name: f"{what} {name}: {m}")

    M, K, N, B = 6, 10, 8, 4
    S, IN, OUT = 3, 10, 8  # tiled::linear's cases
    # (a shape, b shape, a placement, b placement, bias placement or None (no bias), expected output placement)
    cases = [
        ((M, K), (K, N), R, R, R, R),
        ((M, K), (K, N), Shard(0), R, R, Shard(0)),  # rows
        ((M, K), (K, N), Shard(0), R, None, Shard(0)),
        ((M, K), (K, N), R, Shard(1), Shard(0), Shard(1)),  # columns (ColwiseParallel)
        ((M, K), (K, N), R, Shard(1), None, Shard(1)),
        ((M, K), (K, N), Shard(1), Shard(0), R, P),  # contraction (RowwiseParallel): bias once, not per rank
        ((M, K), (K, N), Shard(1), Shard(0), None, P),
        ((7, 9), (9, 5), Shard(1), Shard(0), R, P),  # uneven shards
        ((7, 9), (9, 5), Shard(0), R, R, Shard(0)),
        ((B, M, K), (B, K, N), Shard(0), Shard(0), R, Shard(0)),  # batch
        ((B, M, K), (K, N), Shard(0), R, R, Shard(0)),
        ((M, K), (B, K, N), R, Shard(0), None, Shard(0)),
        ((B, M, K), (K, N), Shard(1), R, None, Shard(1)),
        ((B, M, K), (B, K, N), Shard(2), Shard(1), R, P),
        ((B, M, K), (K, N), R, Shard(1), Shard(0), Shard(2)),
    ]
    for a_shape, b_shape, pa, pb, pbias, pout in cases:
        a, b, bias = rnd(*a_shape), rnd(*b_shape), rnd(b_shape[-1])
        bias = None if pbias is None else bias
        ref_a, ref_b = a.clone().requires_grad_(), b.clone().requires_grad_()
        ref_bias = None if bias is None else bias.clone().requires_grad_()
        ref = torch.ops.tiled.gemm(ref_a, ref_b, ref_bias)  # the unsharded op
        A, Bt = _dt(a, mesh, pa), _dt(b, mesh, pb)
        BI = None if bias is None else _dt(bias, mesh, pbias)
        # The shared-weight backward branch flattens a: gather it first where it cannot.
        gather = len(b_shape) == 2 and len(a_shape) == 3 and not _flattens(A)
        check(f"{a_shape}{pa} x {b_shape}{pb} + bias {pbias}", torch.ops.tiled.gemm, (A, Bt, BI),
              (ref_a, ref_b, ref_bias), ref, pout, ("da", "db", "dbias"), gather, ("gemm", a_shape, pa))

    # tiled::linear (what TiledLinear calls): x [..., in], weight [out, in], bias [out].
    lcases = [
        ((B, S, IN), OUT, R, R, R, R),
        ((B, S, IN), OUT, Shard(0), R, R, Shard(0)),  # batch
        ((B, S, IN), OUT, Shard(1), R, None, Shard(1)),  # sequence
        ((B, S, IN), OUT, R, Shard(0), Shard(0), Shard(2)),  # ColwiseParallel
        ((B, S, IN), OUT, R, Shard(0), None, Shard(2)),
        ((B, S, IN), OUT, Shard(2), Shard(1), R, P),  # RowwiseParallel: bias once
        ((B, S, IN), OUT, Shard(2), Shard(1), None, P),
        ((M, IN), 7, Shard(1), Shard(1), R, P),  # 2-D x, uneven out
        ((M, IN), 7, R, Shard(0), Shard(0), Shard(1)),
        ((IN,), OUT, R, Shard(0), Shard(0), Shard(0)),  # 1-D x
    ]
    for x_shape, out_f, px, pw, pbias, pout in lcases:
        x, w = rnd(*x_shape), rnd(out_f, x_shape[-1])
        bias = None if pbias is None else rnd(out_f)
        rx, rw = x.clone().requires_grad_(), w.clone().requires_grad_()
        rb = None if bias is None else bias.clone().requires_grad_()
        ref = torch.ops.tiled.linear(rx, rw, rb)
        X, W = _dt(x, mesh, px), _dt(w, mesh, pw)
        BI = None if bias is None else _dt(bias, mesh, pbias)
        # The backward flattens x and grad: gather x first where it cannot.
        check(f"linear {x_shape}{px} x W[{out_f},{x_shape[-1]}]{pw} + bias {pbias}", torch.ops.tiled.linear,
              (X, W, BI), (rx, rw, rb), ref, pout, ("dx", "dw", "dbias"), not _flattens(X),
              ("linear", x_shape, px))

    # Only the sequence-sharded cases (a [B, M, K] on M with a 2-D b; x
    # [B, S, in] on S) may need the workaround, and only where DTensor
    # cannot flatten them.
    may_need = [("gemm", (B, M, K), Shard(1)), ("linear", (B, S, IN), Shard(1))]
    assert all(c in may_need for c in via_replicate), via_replicate

    # What torch 2.11's all-gather of the uneven S = 3 shard above gives: a
    # narrowed, non-contiguous local tensor under contiguous global strides.
    # Its backward reshape is then a view the local tensor cannot take
    # (RuntimeError "view size is not compatible ..."); replicate_contiguous
    # repairs it.  Built by hand so every torch checks the repair.
    x, w = rnd(B, S, IN), rnd(OUT, IN)
    padded = torch.zeros(B, S + 1, IN, dtype=x.dtype, device=device)
    padded[:, :S] = x
    bad = DTensor.from_local(padded.narrow(1, 0, S), mesh, [R], run_check=False, shape=x.shape, stride=x.stride())
    assert not bad.to_local().is_contiguous() and bad.stride() == x.stride()
    X = bad.detach().requires_grad_()
    fixed = replicate_contiguous(X)
    assert fixed.placements == (R,) and fixed.to_local().is_contiguous()
    assert fixed.to_local().stride() == fixed.stride()
    W = _dt(w, mesh, R)
    rx, rw = x.clone().requires_grad_(), w.clone().requires_grad_()
    ref = torch.ops.tiled.linear(rx, rw)
    out = torch.ops.tiled.linear(fixed, W)
    torch.testing.assert_close(out.full_tensor(), ref, rtol=1e-12, atol=1e-12)
    g = rnd(*ref.shape)
    ref.backward(g)
    (out.full_tensor() * g).sum().backward()
    torch.testing.assert_close(X.grad.full_tensor(), rx.grad, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(W.grad.full_tensor(), rw.grad, rtol=1e-12, atol=1e-12)
    # And on a sharded input the gradient comes back in the input's placement.
    X = _dt(x, mesh, Shard(1))
    out = torch.ops.tiled.linear(replicate_contiguous(X), _dt(w, mesh, R, requires_grad=False))
    (out.full_tensor() * g).sum().backward()
    assert X.grad.placements == (Shard(1),)
    torch.testing.assert_close(X.grad.full_tensor(), rx.grad, rtol=1e-12, atol=1e-12)

    # Column-major operands (transposed views of sharded DTensors flip the shard dim).
    a, b = rnd(M, K), rnd(K, N)
    At = _dt(a.t().contiguous(), mesh, Shard(0), requires_grad=False).t()  # a, sharded on K, column-major
    Bt = _dt(b.t().contiguous(), mesh, Shard(1), requires_grad=False).t()  # b, sharded on K, column-major
    assert At.placements == (Shard(1),) and Bt.placements == (Shard(0),)
    out = torch.ops.tiled.gemm(At, Bt)
    assert out.placements == (P,)
    torch.testing.assert_close(out.full_tensor(), torch.ops.tiled.gemm(a, b), rtol=1e-12, atol=1e-12)

    # Partial inputs (linearity): a partial sum times a replicated b stays partial.
    a_part = rnd(M, K)
    A = DTensor.from_local(a_part, mesh, [P])
    out = torch.ops.tiled.gemm(A, _dt(b, mesh, R, requires_grad=False), _dt(rnd(N), mesh, R, requires_grad=False))
    assert out.placements == (P,)
    # Mismatched layouts are redistributed by DTensor, not rejected.
    out = torch.ops.tiled.gemm(_dt(a, mesh, Shard(1), False), _dt(b, mesh, Shard(1), False))
    torch.testing.assert_close(out.full_tensor(), torch.ops.tiled.gemm(a, b), rtol=1e-12, atol=1e-12)

    # A 2-D mesh (2 x 1): the rule is combined per mesh dimension.
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor import distribute_tensor

    mesh2 = init_device_mesh(device, (WORLD, 1), mesh_dim_names=("dp", "tp"))
    bias = rnd(N)
    A = distribute_tensor(a, mesh2, [Shard(0), R])
    Bt = distribute_tensor(b, mesh2, [R, Shard(1)])
    BI = distribute_tensor(bias, mesh2, [R, Shard(0)])
    out = torch.ops.tiled.gemm(A, Bt, BI)
    assert out.placements == (Shard(0), Shard(1)), out.placements
    torch.testing.assert_close(out.full_tensor(), torch.ops.tiled.gemm(a, b, bias), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("device", BACKENDS)
def test_tp_op_sharding_rule_matches_unsharded_op(device):
    spawn(_tp_op, device)


# ---------------------------------------------------------------------------
# Tensor parallel: ColwiseParallel / RowwiseParallel on TiledLinear


def _tp_model(rank, device):
    from torch.distributed.tensor import DTensor, Shard
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    from torch_tiled_gemm.distributed import optimizer_param_groups, tensor_parallel_plan

    mesh = mesh_for(device)
    ref_losses, ref_state = reference_run(device)
    model = make_model(device, tiled=True)
    plan = tensor_parallel_plan(model)
    assert {k: type(v) for k, v in plan.items()} == {
        f"blocks.{i}.{n}": s for i in range(2) for n, s in (("up", ColwiseParallel), ("down", RowwiseParallel))
    }
    parallelize_module(model, mesh, plan)
    up, down = model.blocks[0].up, model.blocks[0].down
    assert isinstance(up, ttg.TiledLinear) and isinstance(up.weight, DTensor)
    assert up.weight.placements == (Shard(0),) and down.weight.placements == (Shard(1),)
    # The Linears' parameters are now DTensors, the LayerNorms' plain tensors.
    # The foreach optimizer kernels (torch's default on CUDA) refuse that mix:
    # one parameter group per kind.  foreach=True so CPU runs check it too.
    groups = optimizer_param_groups(model)
    assert [all(isinstance(p, DTensor) for p in g["params"]) for g in groups] == [True, False]
    assert sum(len(g["params"]) for g in groups) == len(list(model.parameters()))
    xs, ys = make_data(device)  # every rank sees the full batch
    losses = [l.item() for l in train(model, xs, ys, params=groups, foreach=True)]
    assert losses == pytest.approx(ref_losses, rel=TOL, abs=TOL)
    assert_params_close(model, ref_state, TOL)

    # An explicit plan by layer name gives the same forward.
    model2 = make_model(device, tiled=True)
    parallelize_module(model2, mesh, tensor_parallel_plan(model2, colwise={"up"}, rowwise={"down"}))
    ref_model = make_model(device, tiled=False)
    torch.testing.assert_close(model2(xs[0]), ref_model(xs[0]), rtol=TOL, atol=TOL)


@pytest.mark.parametrize("device", BACKENDS)
def test_tp_colwise_rowwise_tiledlinear_matches_single_process_linear(device):
    spawn(_tp_model, device)


# ---------------------------------------------------------------------------
# registration (no process group needed)


def _run_python(code):
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                         env=env, cwd=root, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_lazy_registration_either_import_order():
    out = _run_python("""
        import sys, torch
        import torch_tiled_gemm.distributed as tdist
        assert "torch.distributed.tensor" not in sys.modules, "imported DTensor eagerly"
        assert not tdist.sharding_rules_registered()
        from torch.distributed.tensor import DTensor   # registration happens here
        assert tdist.sharding_rules_registered()
        assert torch.ops.tiled.gemm.default in DTensor._op_dispatcher.sharding_propagator.op_strategy_funcs
        assert tdist.register_sharding_rules()         # idempotent
        print("ok")
    """)
    assert out.strip() == "ok"
    out = _run_python("""
        from torch.distributed.tensor import DTensor
        import torch_tiled_gemm.distributed as tdist   # DTensor already imported: registers at once
        assert tdist.sharding_rules_registered()
        print("ok")
    """)
    assert out.strip() == "ok"


def test_package_import_arms_registration():
    out = _run_python("""
        import sys
        import torch_tiled_gemm
        if "torch_tiled_gemm.distributed" not in sys.modules:
            print("not wired")
        else:
            from torch.distributed.tensor import DTensor
            print("ok" if torch_tiled_gemm.distributed.sharding_rules_registered() else "not registered")
    """).strip()
    if out == "not wired":
        pytest.skip("torch_tiled_gemm/__init__.py does not import .distributed yet")
    assert out == "ok"
