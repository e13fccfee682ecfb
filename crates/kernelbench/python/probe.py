"""Probe one KernelBench problem for `kevo kernelbench import`.

Usage: python3 probe.py PROBLEM.py [--device cpu|cuda] [--time [--compile]]

A problem file defines `Model` (a torch.nn.Module), `get_inputs()` and
`get_init_inputs()`, with its sizes as module-level constants. This script
imports it, runs the reference, and prints one JSON object on stdout:

- globals: the module-level int, float and bool constants, in order (the
  problem's dimensions and parameters, which kevo passes to kernels);
- forward: the names of forward()'s arguments;
- sizes: for "full" (the problem as written) and, where the problem has a
  batch-like constant that only changes the batch, "held_out" and "smoke":
  the constants' values and every tensor's shape, the aten ops forward()
  runs in order, and the shape of the largest tensor one of them makes;
- tensors: each input and each entry of the module's state (parameters and
  buffers) with its dtype and the distribution it was drawn from
  (constant, integers, uniform or normal, fitted to the values; `fit` says
  how well), and each output with its statistics; an input whose last
  two axes hold square matrices that are all upper or lower triangular,
  or symmetric, says so (`structure`), and its distribution is fitted to
  the triangle that is drawn;
- tolerance: per output, the check kevo writes and how it was derived:
  exact for integers and selections (every element an input value or 0),
  else every element within tau (|ref| + rms(ref)), tau the largest of
  --tolerance-floor, --tolerance-margin times the worst error of the
  honest variants (the module in float64, and in float32 on the CPU) and
  a naive float32 sum's error over the output's reduction length, with
  the errors of the narrower variants (bfloat16, float16, TF32, the
  reference stored as bf16 or fp16) that tau must stay below;
- screen: what a null candidate would get away with (zeros, a constant,
  an input copy) under KernelBench's 1e-4 and under kevo's own check of
  the folder (the tolerance above), whether the output depends on the
  input and the weights, whether two runs agree, and flat output axes;
- flops: counted by torch's flop counter where this torch has one;
- eager_ms (with --time) and compile_ms (with --time --compile): median,
  min and max of timed runs on the device, or the error that stopped them.

Nothing here is kevo's evaluation: it only describes the problem.
"""

import argparse
import importlib.util
import inspect
import json
import math
import sys
import time


def load(path, name="kb_problem"):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for required in ("Model", "get_inputs", "get_init_inputs"):
        if not hasattr(module, required):
            raise SystemExit(f"{path}: defines no `{required}`")
    return module


def constants(module):
    out = {}
    for key, value in vars(module).items():
        if key.startswith("_") or inspect.ismodule(value) or callable(value):
            continue
        if isinstance(value, bool):
            out[key] = value
        elif isinstance(value, (int, float)):
            out[key] = value
    return out


def tensors_of(values):
    import torch

    out = []
    for v in values:
        if isinstance(v, torch.Tensor):
            out.append(v)
        elif isinstance(v, (int, float, bool)):
            out.append(v)
        else:
            raise SystemExit(f"an input is neither a tensor nor a number: {type(v).__name__}")
    return out


def structure(t):
    """`upper`, `lower` or `symmetric` where `t`'s last two axes are
    square matrices of that kind (not all zero, not diagonal), else None."""
    import torch

    if not t.is_floating_point() or t.dim() < 2 or t.shape[-1] != t.shape[-2] or t.shape[-1] < 2:
        return None
    if not bool(t.any()):
        return None
    upper, lower = torch.equal(t, t.triu()), torch.equal(t, t.tril())
    if upper and lower:
        return None  # diagonal: not a kind kevo draws
    if upper:
        return "upper"
    if lower:
        return "lower"
    if torch.equal(t, t.transpose(-1, -2)):
        return "symmetric"
    return None


def drawn_part(t, kind):
    """The values of `t` that were drawn, for a matrix of `kind`."""
    import torch

    n = t.shape[-1]
    keep = torch.ones(n, n, dtype=torch.bool, device=t.device)
    keep = keep.tril() if kind == "lower" else keep.triu()
    return t[..., keep]


def fit(t):
    """The distribution family `t`'s values look drawn from."""
    import torch

    x = t.detach().double().flatten().cpu()
    n = x.numel()
    if n == 0:
        return {"kind": "constant", "value": 0.0, "fit": 1.0}
    lo, hi = float(x.min()), float(x.max())
    if lo == hi:
        return {"kind": "constant", "value": lo, "fit": 1.0}
    if not t.is_floating_point() or bool(torch.all(x == torch.round(x))) and n > 8 and hi - lo < 1e6:
        return {"kind": "integers", "low": int(lo), "high": int(hi), "fit": 1.0}
    mean, std = float(x.mean()), float(x.std()) if n > 1 else 0.0
    # Uniform on [lo, hi]: std is (hi - lo) / sqrt(12). Normal: about 99.7%
    # within three standard deviations, and tails well past two.
    uniform_std = (hi - lo) / math.sqrt(12.0)
    uniform_fit = 1.0 - min(1.0, abs(std - uniform_std) / max(uniform_std, 1e-30))
    z = (x - mean) / max(std, 1e-30)
    within2 = float((z.abs() <= 2.0).double().mean())
    normal_fit = 1.0 - min(1.0, abs(within2 - 0.9545) / 0.0455) if n > 50 else 0.0
    if normal_fit > uniform_fit and n > 50:
        return {"kind": "normal", "mean": mean, "std": std, "fit": round(normal_fit, 3)}
    return {"kind": "uniform", "low": lo, "high": hi, "fit": round(uniform_fit, 3)}


def dtype_name(t):
    return str(t.dtype).replace("torch.", "")


def run(module, device, seed, overrides=None, state=None, forward_seed=None):
    """Build the model and inputs with `overrides` of the constants, seeded,
    and run forward once (with the random state at `forward_seed` when
    given): (model, inputs, outputs)."""
    import torch

    for key, value in (overrides or {}).items():
        setattr(module, key, value)
    torch.manual_seed(seed)
    init = module.get_init_inputs()
    model = module.Model(*init).to(device)
    if state is not None:
        model.load_state_dict(state)
    torch.manual_seed(seed + 1)
    inputs = [v.to(device) if hasattr(v, "to") else v for v in tensors_of(module.get_inputs())]
    if forward_seed is not None:
        torch.manual_seed(forward_seed)
    with torch.no_grad():
        out = model(*inputs)
    outputs = list(out) if isinstance(out, (tuple, list)) else [out]
    for o in outputs:
        if not isinstance(o, torch.Tensor):
            raise SystemExit(f"forward() returns a {type(o).__name__}, not tensors")
    return model, inputs, outputs


def close(a, b, tol):
    import torch

    if a.shape != b.shape:
        return False
    return bool(torch.allclose(a.double(), b.double(), atol=tol, rtol=tol))


def normalized_error(got, want):
    """The largest |got - want| / (|want| + rms(want)) over the elements:
    kevo's imported check passes every element within tau of it (task.toml's
    rtol = atol_rms = tau). A non-finite reference element must be matched
    exactly; a NaN or a mismatched shape is an infinite error (None)."""
    import torch

    if got.shape != want.shape:
        return None
    g, w = got.detach().double().flatten(), want.detach().double().flatten()
    if w.numel() == 0:
        return 0.0
    finite = torch.isfinite(w)
    if not bool((g[~finite] == w[~finite]).all()):
        return None
    g, w = g[finite], w[finite]
    if w.numel() == 0:
        return 0.0
    rms = float(w.square().mean().sqrt())
    scale = w.abs() + rms
    error = (g - w).abs()
    if not bool(torch.isfinite(error).all()):
        return None
    if rms == 0.0:
        return 0.0 if bool((error == 0).all()) else None
    return float((error / scale).max())


def is_selection(out, pool):
    """Every element (of a sample of 65536) is exactly one of the input or
    weight values or 0: a ReLU, a max or a pooling picks, it does not round,
    so an honest kernel returns the same bits and the check can be exact."""
    import torch

    flat = out.detach().flatten()
    if flat.numel() == 0 or not flat.is_floating_point():
        return False
    if flat.numel() > 65536:
        gen = torch.Generator(device="cpu").manual_seed(7)
        flat = flat[torch.randint(flat.numel(), (65536,), generator=gen).to(flat.device)]
    values = [p.detach().flatten().to(flat.device, flat.dtype) for p in pool if p.is_floating_point()]
    values.append(torch.zeros(1, device=flat.device, dtype=flat.dtype))
    return bool(torch.isin(flat, torch.cat(values)).all())


def variant(model, inputs, device, dtype, rounded_to=None):
    """forward() of a copy of the module and inputs on `device` in `dtype`
    (with `rounded_to`: float32, on inputs and weights rounded to that
    type first, as a kernel that reads them narrower would), as outputs on
    the reference's device."""
    import copy

    import torch

    def cast(v):
        if not isinstance(v, torch.Tensor):
            return v
        if not v.is_floating_point():
            return v.to(device)
        if rounded_to is not None:
            v = v.to(rounded_to)
        return v.to(device=device, dtype=dtype)

    m = copy.deepcopy(model)
    if rounded_to is not None:
        with torch.no_grad():
            for p in list(m.parameters()) + list(m.buffers()):
                if p.is_floating_point():
                    p.copy_(p.to(rounded_to).to(p.dtype))
    return forward_outputs(m.to(device=device, dtype=dtype), [cast(v) for v in inputs])


def reduction_length(model, inputs, out, k, flops, largest):
    """About how many terms a naive kernel sums for one element of output
    `k`: the larger of two estimates. Torch's flops over twice the largest
    tensor forward() makes (a contraction's length) plus what a later
    reduction folds into one output; and, measured, how many output
    elements one input element reaches, times the inputs per output (a
    matmul's row reaches N of M N outputs from M K inputs: K terms)."""
    import torch

    out_n = max(1, out.numel())
    estimates = [1.0]
    if flops:
        largest_n = max(math.prod(largest), out_n) if largest else out_n
        estimates.append(flops / (2 * largest_n) + largest_n / out_n)
    gen = torch.Generator(device="cpu").manual_seed(11)
    for j, v in enumerate(inputs):
        if not isinstance(v, torch.Tensor) or not v.is_floating_point() or v.numel() == 0:
            continue
        reach = 0
        for _ in range(3):
            at = int(torch.randint(v.numel(), (1,), generator=gen))
            nudged = v.clone()
            nudged.view(-1)[at] += 1.0 + abs(float(v.view(-1)[at]))
            changed = forward_outputs(model, inputs[:j] + [nudged] + inputs[j + 1 :])[k]
            if changed.shape == out.shape:
                reach = max(reach, int((changed != out).sum()))
        estimates.append(reach * v.numel() / out_n)
    return max(estimates)


def unread_state(model, inputs, outputs):
    """The module's parameters and buffers that no output depends on (a
    batch norm's running statistics and batch counter in training mode):
    each changed whole, the outputs stay bit for bit the same. A kernel
    need not read them, so the work model does not count their bytes."""
    import copy

    import torch

    unread = []
    for name, value in model.state_dict().items():
        other = copy.deepcopy(model)
        with torch.no_grad():
            target = other.state_dict()[name]
            if target.numel() == 0:
                continue
            if target.is_floating_point():
                target.mul_(1.5).add_(0.7)
            else:
                target.add_(3)
        try:
            changed = forward_outputs(other, inputs)
        except Exception:
            continue
        if all(c.shape == o.shape and torch.equal(c, o) for c, o in zip(changed, outputs)):
            unread.append(name)
    return unread


def forward_outputs(model, inputs):
    import torch

    with torch.no_grad():
        out = model(*inputs)
    return list(out) if isinstance(out, (tuple, list)) else [out]


def sequential_floor(terms):
    """The error of a naive float32 sum of `terms` terms, as a share of
    the output's scale, with room for the worst of 10^8 outputs: 4 x 2^-24
    sqrt(terms). A sequential sum errs about 2^-24 sqrt(terms) / 4.9 per
    output (1.1e-6 at 4096 terms, 1.4e-5 at 131072, the worst of 64
    simulated dot products)."""
    return 4.0 * 2.0**-24 * math.sqrt(terms)


def derive_tolerance(model, inputs, outputs, device, flops, largest, margin, floor):
    """Per output, the check kevo writes and how it was derived: the honest
    variants (the module in float64, in float32 on the CPU) give the error
    an honest float32 kernel may make; tau = max(margin x their worst,
    floor, the error of a naive float32 sum of the output's reduction
    length). The narrower variants (the module in bfloat16, float16, TF32,
    the reference stored as bf16 or fp16) must each be above tau, or the
    record says the check cannot tell them apart. A selection is exact."""
    import torch

    records = []
    honest, narrow = {}, {}
    runs = {"float64": lambda: variant(model, inputs, device, torch.float64)}
    if device != "cpu" and (flops or 0) <= 5e10:
        runs["float32 on the cpu"] = lambda: variant(model, inputs, "cpu", torch.float32)
    narrower = {
        "bfloat16": lambda: variant(model, inputs, device, torch.bfloat16),
        "float16": lambda: variant(model, inputs, device, torch.float16),
        "float32 on bf16 inputs": lambda: variant(model, inputs, device, torch.float32, torch.bfloat16),
        "float32 on fp16 inputs": lambda: variant(model, inputs, device, torch.float32, torch.float16),
    }
    if device == "cuda":

        def tf32():
            torch.backends.cuda.matmul.allow_tf32 = True
            torch.backends.cudnn.allow_tf32 = True
            try:
                return variant(model, inputs, device, torch.float32)
            finally:
                torch.backends.cuda.matmul.allow_tf32 = False
                torch.backends.cudnn.allow_tf32 = False

        narrower["tf32"] = tf32
    for table, source in ((honest, runs), (narrow, narrower)):
        for name, run_it in source.items():
            try:
                table[name] = [o.to(outputs[k].device) for k, o in enumerate(run_it())]
            except Exception as e:  # an op without this dtype or device
                table[name] = f"{type(e).__name__}: {str(e)[:160]}"
    pool = [v for v in inputs if isinstance(v, torch.Tensor)] + list(model.state_dict().values())
    for k, out in enumerate(outputs):
        record = {"honest": {}, "narrow": {}}
        for table, into in ((honest, record["honest"]), (narrow, record["narrow"])):
            for name, result in table.items():
                if isinstance(result, str):
                    into[name] = {"error": result}
                else:
                    into[name] = {"normalized": normalized_error(result[k].to(out.dtype) if out.is_floating_point() else result[k], out)}
        if out.is_floating_point():
            for name, dtype in (("bf16 storage", torch.bfloat16), ("fp16 storage", torch.float16)):
                record["narrow"][name] = {"normalized": normalized_error(out.to(dtype).to(out.dtype), out)}
        if not out.is_floating_point():
            record["check"] = {"exact": True, "why": "an integer output"}
        elif is_selection(out, pool) and all(
            v.get("normalized") == 0.0 for v in record["honest"].values() if "error" not in v
        ):
            record["check"] = {"exact": True, "why": "every element is an input or weight value or 0, and every honest variant matches it bit for bit"}
        else:
            errors = [v["normalized"] for v in record["honest"].values() if "error" not in v]
            worst = max([e for e in errors if e is not None], default=0.0)
            if any(e is None for e in errors):
                worst = None
            terms = reduction_length(model, inputs, out, k, flops, largest)
            tau = max(margin * (worst or 0.0), floor, sequential_floor(terms))
            narrow_errors = {
                name: float("inf") if v["normalized"] is None else v["normalized"]
                for name, v in record["narrow"].items()
                if "error" not in v
            }
            least = min(narrow_errors.values(), default=None)
            passing = sorted(name for name, e in narrow_errors.items() if e <= tau)
            record["check"] = {
                "exact": False,
                "tau": tau,
                "honest_worst": worst,
                "reduction_length": terms,
                "narrow_least": None if least in (None, float("inf")) else least,
                "separated": least is not None and not passing,
                "not_separated": passing,
            }
        records.append(record)
    return records


def kevo_passes(got, want, check):
    """kevo's check of an imported folder (crates/tasks folder checks), as
    import writes it: bit for bit where `check` is exact, else every element
    within tau (|want| + rms(want)) and no NaN."""
    import torch

    if got.shape != want.shape:
        return False
    if check["exact"] or not want.is_floating_point() or not got.is_floating_point():
        return bool(torch.equal(got.to(want.dtype), want))
    error = normalized_error(got, want)
    return error is not None and error <= check["tau"]


def screen(module, device, base, model, inputs, outputs, check):
    """Null candidates against KernelBench's 1e-4 and kevo's `check` of the
    first output, and what the output depends on."""
    import torch

    out = outputs[0].detach()
    result = {}
    nulls = {"zero": torch.zeros_like(out)}
    if out.is_floating_point():
        nulls["const"] = torch.full_like(out, float(out.double().mean()))
        result["zero"] = close(nulls["zero"], out, 1e-4)
        result["const"] = close(nulls["const"], out, 1e-4)
    else:
        nulls["const"] = torch.full_like(out, out.flatten()[0].item())
        result["zero"] = bool(torch.all(out == 0))
        result["const"] = bool(torch.all(out == out.flatten()[0]))
    result["ident"] = any(
        isinstance(i, torch.Tensor) and i.shape == out.shape and close(i, out, 1e-4) for i in inputs
    )
    # The same null candidates against kevo's own check of the folder: its
    # relative tolerance is looser than 1e-4 for large outputs, so a nearly
    # constant output of large values could pass it.
    copies = [i for i in inputs if isinstance(i, torch.Tensor) and i.shape == out.shape]
    result["kevo"] = sorted(
        [name for name, null in nulls.items() if kevo_passes(null, out, check)]
        + (["ident"] if any(kevo_passes(i.to(out.dtype), out, check) for i in copies) else [])
    )
    # The same inputs and weights with another random state at forward():
    # a module that draws random numbers (dropout) is not deterministic.
    _, _, again = run(module, device, base, state=model.state_dict(), forward_seed=base + 303)
    result["det"] = close(again[0], out, 1e-4) if out.is_floating_point() else bool(torch.equal(again[0], out))
    # Other inputs, same weights; then other weights, same inputs.
    import copy

    state = copy.deepcopy(model.state_dict())
    torch.manual_seed(base + 101)
    other_inputs = [v.to(device) if hasattr(v, "to") else v for v in tensors_of(module.get_inputs())]
    with torch.no_grad():
        o2 = model(*other_inputs)
    o2 = (list(o2) if isinstance(o2, (tuple, list)) else [o2])[0]
    result["inpindep"] = close(o2, out, 1e-4) if out.is_floating_point() else bool(torch.equal(o2, out))
    if len(state) > 0:
        torch.manual_seed(base + 202)
        other = module.Model(*module.get_init_inputs()).to(device)
        with torch.no_grad():
            o3 = other(*inputs)
        o3 = (list(o3) if isinstance(o3, (tuple, list)) else [o3])[0]
        result["wtindep"] = close(o3, out, 1e-4) if out.is_floating_point() else bool(torch.equal(o3, out))
        model.load_state_dict(state)
    flat = []
    if out.is_floating_point() and out.dim() > 0:
        for axis in range(out.dim()):
            if out.shape[axis] > 1 and float(out.double().std(dim=axis).max()) < 1e-4:
                flat.append(axis)
    result["flat_axes"] = flat
    return result


def stats(t):
    x = t.detach().double().flatten().cpu()
    if x.numel() == 0:
        return {"absmax": 0.0, "absmean": 0.0, "std": 0.0}
    return {
        "absmax": float(x.abs().max()),
        "absmean": float(x.abs().mean()),
        "std": float(x.std()) if x.numel() > 1 else 0.0,
    }


def count_flops(model, inputs):
    try:
        from torch.utils.flop_counter import FlopCounterMode
    except ImportError:
        return None
    import torch

    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        model(*inputs)
    return int(counter.get_total_flops())


def time_forward(fn, inputs, device, runs=20):
    import torch

    with torch.no_grad():
        for _ in range(3):
            fn(*inputs)
        times = []
        for _ in range(runs):
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn(*inputs)
                end.record()
                torch.cuda.synchronize()
                times.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                fn(*inputs)
                times.append((time.perf_counter() - t0) * 1e3)
    times.sort()
    return {"median": times[len(times) // 2], "min": times[0], "max": times[-1], "runs": runs}


def batch_constant(module, consts, first_input_shape):
    """A constant that sets the leading dimension of the first input."""
    if not first_input_shape:
        return None
    candidates = [
        key
        for key, value in consts.items()
        if not isinstance(value, bool) and isinstance(value, int) and value >= 2 and value == first_input_shape[0]
    ]
    candidates.sort(key=lambda k: "batch" not in k.lower())
    return candidates[0] if candidates else None


def trace(model, inputs):
    """The aten ops forward() runs, in order, and the shape of the largest
    tensor any of them makes (what a staged kernel's scratch must hold)."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    def storage(t):
        # untyped_storage() since torch 2.0; storage() before.
        return (t.untyped_storage() if hasattr(t, "untyped_storage") else t.storage()).data_ptr()

    class Recorder(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops, self.largest = [], []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            self.ops.append(func.overloadpacket.__name__)
            # A view or an in-place result shares an argument's storage: it
            # is no new tensor (Linear's transposed weight is a view).
            shared = {storage(a) for a in args if isinstance(a, torch.Tensor)}
            for t in result if isinstance(result, (tuple, list)) else [result]:
                if (
                    isinstance(t, torch.Tensor)
                    and storage(t) not in shared
                    and t.numel() > math.prod(self.largest or [0])
                ):
                    self.largest = list(t.shape)
            return result

    recorder = Recorder()
    with recorder, torch.no_grad():
        model(*inputs)
    return recorder.ops, recorder.largest


def shapes(inputs, outputs, model):
    import torch

    try:
        flops = count_flops(model, inputs)
    except Exception:
        flops = None
    try:
        ops, largest = trace(model, inputs)
    except Exception:
        ops, largest = [], []
    return {
        "flops": flops,
        "ops": ops,
        "largest": largest,
        "inputs": [list(i.shape) if isinstance(i, torch.Tensor) else [] for i in inputs],
        "state": {k: list(v.shape) for k, v in model.state_dict().items()},
        "outputs": [list(o.shape) for o in outputs],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("problem")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--time", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--tolerance-margin", type=float, default=16.0)
    parser.add_argument("--tolerance-floor", type=float, default=1e-5)
    args = parser.parse_args()
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = args.device
    module = load(args.problem)
    consts = constants(module)
    model, inputs, outputs = run(module, device, args.seed)
    params = inspect.signature(module.Model.forward).parameters
    forward = [p for p in params if p != "self"]
    if any(p.kind == inspect.Parameter.VAR_POSITIONAL for p in params.values()) or len(forward) < len(inputs):
        raise SystemExit(
            f"forward() names {len(forward)} arguments for the {len(inputs)} inputs of get_inputs(); kevo needs one named argument per input"
        )
    persistent = set(model.state_dict())
    hidden = [n for n, _ in model.named_buffers() if n not in persistent]
    if hidden:
        raise SystemExit(f"the module has buffers outside its state_dict ({', '.join(hidden)}), which a kernel would not get")
    report = {
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name() if device == "cuda" else "cpu",
        # In the file's order, which is the order of the kernel's arguments.
        "globals": [[k, v] for k, v in consts.items()],
        "forward": forward[: len(inputs)],
        "inputs": [],
        "state": [],
        "outputs": [],
    }
    for name, value in zip(report["forward"], inputs):
        if isinstance(value, torch.Tensor):
            kind = structure(value)
            entry = {"name": name, "dtype": dtype_name(value), "shape": list(value.shape)}
            if kind is None:
                entry["dist"] = fit(value)
            else:
                entry["dist"] = fit(drawn_part(value, kind))
                entry["structure"] = kind
            report["inputs"].append(entry)
        else:
            report["inputs"].append({"name": name, "scalar": value})
    for name, value in model.state_dict().items():
        report["state"].append({"name": name, "dtype": dtype_name(value), "shape": list(value.shape), "dist": fit(value)})
    for k, value in enumerate(outputs):
        entry = {"dtype": dtype_name(value), "shape": list(value.shape)}
        if value.is_floating_point():
            entry.update(stats(value))
        report["outputs"].append(entry)
    sizes = {"full": {"globals": dict(consts), **shapes(inputs, outputs, model)}}
    first = next((i for i in inputs if isinstance(i, torch.Tensor)), None)
    batch = batch_constant(module, consts, list(first.shape) if first is not None else [])
    if batch is not None:
        full = consts[batch]
        smoke = max(1, min(2, full // 2))
        variants = (("held_out", max(1, full * 3 // 4)), ("smoke", smoke), ("smoke_held_out", 1 if smoke > 1 else 3))
        for label, value in variants:
            if value == full:
                continue
            try:
                m2, i2, o2 = run(module, device, args.seed, {batch: value})
                variant = {"globals": {**consts, batch: value}, **shapes(i2, o2, m2)}
                # Only the batch may change: the weights stay as they are.
                if variant["state"] != sizes["full"]["state"]:
                    raise ValueError(f"`{batch}` changes the module's weights too")
                sizes[label] = variant
            except Exception as e:  # a problem whose batch cannot change
                sizes[label] = {"error": f"{type(e).__name__}: {e}"}
        setattr(module, batch, full)
        model, inputs, outputs = run(module, device, args.seed)
    report["batch"] = batch
    report["sizes"] = sizes
    try:
        report["flops"] = count_flops(model, inputs)
    except Exception as e:
        report["flops"] = None
        report["flops_error"] = f"{type(e).__name__}: {e}"
    report["tolerance"] = derive_tolerance(
        model,
        inputs,
        outputs,
        device,
        report["flops"],
        sizes["full"].get("largest") or [],
        args.tolerance_margin,
        args.tolerance_floor,
    )
    report["unread_state"] = unread_state(model, inputs, outputs)
    check = report["tolerance"][0]["check"]
    report["screen"] = screen(module, device, args.seed, model, inputs, outputs, check)
    if args.time:
        report["eager_ms"] = time_forward(model, inputs, device)
    if args.time and args.compile:
        try:
            compiled = torch.compile(model)
            report["compile_ms"] = time_forward(compiled, inputs, device)
        except Exception as e:
            report["compile_ms"] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    json.dump(report, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
