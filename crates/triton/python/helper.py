"""kevo's Triton helper: compiles Triton candidates to CUDA binaries.

kevo starts one helper per worker and keeps it running (importing Triton
takes ~0.3 s; a compile in a warm helper ~0.1 s). It reads one JSON
request per line on stdin and answers one JSON line on stdout:

- {"op": "version"} -> {"ok": true, "python": "3.11.7", "triton": "3.6.0"}
- {"op": "compile", "source": TEXT, "kernels": [{"name": "saxpy",
  "params": [["x", "*fp32"], ["n", "i32"], ...], "num_warps": 4,
  "num_stages": 3, "constexprs": {"BLOCK": 1024}}], "arch": 90}
  -> {"ok": true, "kernels": [{"name", "cubin" (path in the scratch
  directory), "num_warps", "shared", "global_scratch_size",
  "global_scratch_align", "profile_scratch_size", "num_ctas",
  "constexprs", "arg_names"}], "seconds": 0.1}
  or {"ok": false, "stage": "module" | "syntax" | "entry" | "signature" |
  "compile", "reason": TEXT}: a rejected candidate, with the reason a
  model needs and nothing more.

Nothing of the candidate runs before its module passes `check_module`: a
module of imports of triton, triton.language and math, constant
assignments, and @triton.jit functions whose bodies name nothing outside
the kernel language. Python code that runs at import (file access,
host-side caching, torch) is a channel for reward hacks, so it is
refused. The helper never imports torch; a candidate cannot reach it.

The helper is confined by its parent (the worker's sandbox: no network,
files readable only in system and Python directories, writable only in
its scratch directory) and by resource limits set before it starts.
"""

import ast
import importlib.util
import io
import json
import os
import shutil
import sys
import time
import traceback

# Modules a candidate may import, and what it may import from them.
IMPORTABLE = {"triton", "triton.language", "math"}
FROM_TRITON = {"language", "jit", "cdiv", "next_power_of_2"}
# Builtins a kernel body may name (Triton maps these onto its language).
BUILTINS = {
    "range", "min", "max", "abs", "len", "int", "float", "bool", "print",
    "isinstance", "tuple", "True", "False", "None", "zip", "enumerate",
}
# Parameter types the helper passes to Triton (from the task's buffers
# and scalars).
TYPES = {
    "*fp16", "*bf16", "*fp32", "*fp64", "*i8", "*i16", "*i32", "*i64", "*u8",
    "*u16", "*u32", "*u64", "fp16", "bf16", "fp32", "fp64", "i1", "i8", "i16",
    "i32", "i64", "u8", "u16", "u32", "u64",
}
MAX_REASON = 1200


class Rejected(Exception):
    def __init__(self, stage, reason):
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


def trimmed(text):
    text = text.strip()
    if len(text) > MAX_REASON:
        text = text[: MAX_REASON // 2] + "\n...\n" + text[-MAX_REASON // 2 :]
    return text


def dotted(node):
    """`a.b.c` as text, or None for anything but names and attributes."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def constant_expression(node, known):
    """Whether `node` is made of literals, names already defined at module
    level, arithmetic, tuples and tl.constexpr(...) of those: nothing
    mutable a kernel could keep state in across runs."""
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, ast.Name):
        return node.id in known
    if isinstance(node, ast.Tuple):  # not a list: a list is mutable state
        return all(constant_expression(e, known) for e in node.elts)
    if isinstance(node, ast.UnaryOp):
        return constant_expression(node.operand, known)
    if isinstance(node, ast.BinOp):
        return constant_expression(node.left, known) and constant_expression(node.right, known)
    if isinstance(node, ast.Call):
        return (
            dotted(node.func) in {"tl.constexpr", "triton.language.constexpr", "constexpr"}
            and not node.keywords
            and all(constant_expression(a, known) for a in node.args)
        )
    return False


# The only modules a kernel may reach through attributes: Triton's
# language, its math and libdevice externs, and Python's math. Triton's
# front end calls any Python callable a body names while it compiles, and
# other submodules lead to Python itself (triton.language.core.builtins,
# ....knobs.os), so a path through any other module is refused.
REACHABLE_MODULES = {
    "math",
    "triton",
    "triton.language",
    "triton.language.math",
    "triton.language.extra",
    "triton.language.extra.cuda",
    "triton.language.extra.cuda.libdevice",
    "triton.language.extra.libdevice",
}


def resolve(path):
    """The object `path` ("triton.language.core") names, or None."""
    import importlib

    parts = path.split(".")
    try:
        obj = importlib.import_module(parts[0])
    except ImportError:
        return None
    for part in parts[1:]:
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def check_attribute_path(node, modules):
    """`tl.x.y`: every module on the way must be one a kernel may reach;
    no private name."""
    import types

    path = dotted(node)
    if path is None:
        return
    head, *rest = path.split(".")
    if head not in modules:
        return
    real = modules[head]
    obj = resolve(real)
    where = f"line {node.lineno}"
    if isinstance(obj, types.ModuleType) and obj.__name__ not in REACHABLE_MODULES:
        raise Rejected("module", f"{where}: `{head}` is the module {obj.__name__}, which a kernel may not use")
    for part in rest:
        if part.startswith("_"):
            raise Rejected("module", f"{where}: `{path}`: private names are not part of a kernel")
        obj = getattr(obj, part, None) if obj is not None else None
        real = f"{real}.{part}"
        if isinstance(obj, types.ModuleType) and obj.__name__ not in REACHABLE_MODULES:
            raise Rejected(
                "module",
                f"{where}: `{path}` reaches the module {obj.__name__}; a kernel may use only "
                "triton.language (with its math and libdevice functions), triton.jit/cdiv and math",
            )


def check_body(function, module_names, modules=None):
    """A @triton.jit body may name its parameters, its own locals, module
    constants and jit functions, tl/triton/math and a few builtins; no
    dunder attribute (`__globals__`, `__class__`), and no attribute path
    through a module outside the kernel language (`tl.core.builtins`)."""
    modules = modules or {}
    params = {a.arg for a in function.args.args + function.args.kwonlyargs}
    assigned = set()
    for node in ast.walk(function):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            assigned.add(node.id)
        elif isinstance(node, ast.arg):
            assigned.add(node.arg)
    allowed = params | assigned | module_names | BUILTINS
    for node in ast.walk(function):
        if isinstance(node, ast.Attribute) and node.attr.startswith("__"):
            raise Rejected("module", f"line {node.lineno}: `{node.attr}` is not part of a kernel")
        if isinstance(node, ast.Attribute):
            check_attribute_path(node, modules)
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id not in allowed:
            raise Rejected(
                "module",
                f"line {node.lineno}: `{node.id}` is not a parameter, a local, a module constant, "
                "a jit function, tl, triton or math",
            )
        if isinstance(node, (ast.Import, ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Lambda, ast.ClassDef)):
            raise Rejected("module", f"line {node.lineno}: {type(node).__name__} is not allowed in a kernel")


def check_module(tree):
    """Refuse anything at module level but imports of triton,
    triton.language and math, constants and @triton.jit functions."""
    names = set()
    # Name bound at module level -> the object path it stands for
    # ("tl" -> "triton.language"), for the attribute check of the bodies.
    modules = {}
    functions = []
    for stmt in tree.body:
        where = f"line {stmt.lineno}"
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            continue  # a docstring
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in IMPORTABLE:
                    raise Rejected(
                        "module",
                        f"{where}: `import {alias.name}`: a kernel module imports only triton, "
                        "triton.language and math",
                    )
                if alias.asname:
                    names.add(alias.asname)
                    modules[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    names.add(top)
                    modules[top] = top
            continue
        if isinstance(stmt, ast.ImportFrom):
            module = stmt.module or ""
            if stmt.level != 0 or module not in IMPORTABLE:
                raise Rejected(
                    "module",
                    f"{where}: `from {module} import ...`: a kernel module imports only from triton, "
                    "triton.language and math",
                )
            for alias in stmt.names:
                if alias.name == "*" or (module == "triton" and alias.name not in FROM_TRITON):
                    raise Rejected("module", f"{where}: `from triton import {alias.name}` is not allowed")
                names.add(alias.asname or alias.name)
                modules[alias.asname or alias.name] = f"{module}.{alias.name}"
            continue
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None or not all(isinstance(t, ast.Name) for t in targets):
                raise Rejected("module", f"{where}: only `NAME = constant` assignments are allowed")
            if isinstance(stmt, ast.AnnAssign) and dotted(stmt.annotation) is None:
                raise Rejected("module", f"{where}: an annotation must be a name such as tl.constexpr")
            if not constant_expression(value, names):
                raise Rejected(
                    "module",
                    f"{where}: `{targets[0].id}` must be a constant (numbers, strings, arithmetic "
                    "of earlier constants, tl.constexpr(...)), not code that runs at import",
                )
            names.update(t.id for t in targets)
            continue
        if isinstance(stmt, ast.FunctionDef):
            decorators = [dotted(d) for d in stmt.decorator_list]
            jit = "jit" in names and decorators == ["jit"]
            if not (decorators == ["triton.jit"] or jit):
                raise Rejected(
                    "module",
                    f"{where}: `{stmt.name}` must be decorated with exactly @triton.jit",
                )
            args = stmt.args
            if args.vararg or args.kwarg or args.posonlyargs:
                raise Rejected("module", f"{where}: `{stmt.name}` takes *args or **kwargs")
            for arg in args.args + args.kwonlyargs:
                if arg.annotation is not None and dotted(arg.annotation) is None:
                    raise Rejected("module", f"{where}: the annotation of `{arg.arg}` must be a name such as tl.constexpr")
            for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
                if not constant_expression(default, names):
                    raise Rejected("module", f"{where}: a default of `{stmt.name}` must be a constant")
            if stmt.returns is not None and dotted(stmt.returns) is None:
                raise Rejected("module", f"{where}: the return annotation of `{stmt.name}` must be a name")
            names.add(stmt.name)
            functions.append(stmt)
            continue
        raise Rejected(
            "module",
            f"{where}: {type(stmt).__name__} at module level; a kernel module holds only imports, "
            "constants and @triton.jit functions",
        )
    for function in functions:
        check_body(function, names, modules)


def load(source, scratch, serial):
    """Check the candidate's module, then import it from a file (Triton
    reads a jit function's source from its file)."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise Rejected("syntax", f"line {e.lineno}: {e.msg}") from None
    check_module(tree)
    def_lines = {f.name: f.lineno for f in tree.body if isinstance(f, ast.FunctionDef)}
    path = os.path.join(scratch, f"candidate_{serial}.py")
    with open(path, "w") as f:
        f.write(source)
    name = f"kevo_candidate_{serial}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        raise Rejected("module", f"importing the module failed: {type(e).__name__}: {e}") from None
    return module, def_lines


def compile_kernel(module, def_lines, request, arch):
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    name = request["name"]
    fn = getattr(module, name, None)
    if not isinstance(fn, triton.runtime.jit.JITFunction):
        raise Rejected("entry", f"no @triton.jit function named `{name}`: the task's entry point")
    params = request["params"]
    runtime = [p for p in fn.params if not p.is_constexpr]
    constexpr = [p for p in fn.params if p.is_constexpr]
    if len(runtime) != len(params):
        have = ", ".join(p.name for p in runtime) or "none"
        want = ", ".join(n for n, _ in params)
        raise Rejected(
            "signature",
            f"`{name}` takes {len(runtime)} arguments besides its tl.constexpr ones ({have}); "
            f"the task passes {len(params)}, in this order: {want}",
        )
    order = [p.name for p in fn.params]
    if order[: len(runtime)] != [p.name for p in runtime]:
        raise Rejected("signature", f"`{name}`: its tl.constexpr parameters must come after the others")
    signature = {}
    for p, (_, ty) in zip(runtime, params):
        if ty not in TYPES:
            raise ValueError(f"unknown parameter type {ty}")
        signature[p.name] = ty
    values = dict(request.get("constexprs") or {})
    constexprs = {}
    for p in constexpr:
        if p.name in values:
            constexprs[p.name] = values.pop(p.name)
        elif p.has_default:
            constexprs[p.name] = p.default
        else:
            raise Rejected("signature", f"`{name}`: the tl.constexpr `{p.name}` has no default value")
        signature[p.name] = "constexpr"
    if values:
        raise Rejected("signature", f"`{name}` has no tl.constexpr named {', '.join(sorted(values))}")
    options = {"num_warps": int(request.get("num_warps", 4)), "num_stages": int(request.get("num_stages", 3))}
    captured = io.StringIO()
    stdout = sys.stdout
    sys.stdout = captured  # tl.static_print and ptxas dumps must not reach the protocol
    try:
        compiled = triton.compile(
            ASTSource(fn=fn, signature=signature, constexprs=constexprs),
            target=GPUTarget("cuda", arch, 32),
            options=options,
        )
    except Exception as e:
        message = getattr(e, "error_message", None) or str(e)
        text = f"{type(e).__name__}: {message}"
        node = getattr(e, "node", None)
        if node is not None and hasattr(node, "lineno"):
            # Triton counts lines from the `def` of the function it compiled.
            first = def_lines.get(name) if getattr(e, "src", None) == getattr(fn, "src", None) else None
            at = f"line {first + node.lineno - 1}" if first else f"line {node.lineno} of a function `{name}` calls"
            text = f"{at}: {text}"
        cause = e.__cause__
        if cause is not None:
            text += f"\ncaused by {type(cause).__name__}: {getattr(cause, 'error_message', None) or cause}"
        raise Rejected("compile", trimmed(text)) from None
    finally:
        sys.stdout = stdout
    meta = compiled.metadata
    return compiled.asm["cubin"], {
        "name": meta.name,
        "num_warps": meta.num_warps,
        "num_ctas": meta.num_ctas,
        "shared": meta.shared,
        "global_scratch_size": getattr(meta, "global_scratch_size", 0) or 0,
        "global_scratch_align": getattr(meta, "global_scratch_align", 1) or 1,
        "profile_scratch_size": getattr(meta, "profile_scratch_size", 0) or 0,
        "launch_cooperative_grid": bool(getattr(meta, "launch_cooperative_grid", False)),
        "launch_pdl": bool(getattr(meta, "launch_pdl", False)),
        "constexprs": constexprs,
        # The candidate's names for the task's arguments, in order: its
        # grid directive uses them.
        "arg_names": [p.name for p in runtime],
    }


def handle(request, scratch, serial):
    op = request.get("op")
    if op == "version":
        import triton

        return {"ok": True, "python": sys.version.split()[0], "triton": triton.__version__}
    if op != "compile":
        raise ValueError(f"unknown op {op!r}")
    start = time.perf_counter()
    work = os.path.join(scratch, f"c{serial}")
    os.makedirs(work, exist_ok=True)
    # A cache of its own per candidate: every compile is cold and nothing
    # one candidate compiled is found by the next.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(work, "cache")
    try:
        module, def_lines = load(request["source"], work, serial)
        out = []
        for k, kernel in enumerate(request["kernels"]):
            cubin, meta = compile_kernel(module, def_lines, kernel, int(request.get("arch", 90)))
            path = os.path.join(scratch, f"c{serial}_{k}.cubin")
            with open(path, "wb") as f:
                f.write(cubin)
            meta["cubin"] = path
            out.append(meta)
        return {"ok": True, "kernels": out, "seconds": time.perf_counter() - start}
    finally:
        sys.modules.pop(f"kevo_candidate_{serial}", None)
        shutil.rmtree(work, ignore_errors=True)


def main():
    scratch = sys.argv[1] if len(sys.argv) > 1 else os.getcwd()
    protocol = sys.stdout
    sys.stdout = sys.stderr  # anything printed by Triton goes to stderr
    for serial, line in enumerate(sys.stdin):
        if not line.strip():
            continue
        try:
            answer = handle(json.loads(line), scratch, serial)
        except Rejected as r:
            answer = {"ok": False, "stage": r.stage, "reason": r.reason}
        except Exception as e:
            answer = {"ok": False, "stage": "helper", "reason": trimmed(traceback.format_exc() or str(e))}
        protocol.write(json.dumps(answer) + "\n")
        protocol.flush()


if __name__ == "__main__":
    main()
