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
- An answer with "restart": true is the helper's last: it found its own
  state changed (see `Integrity`) and exits after answering, so that the
  next candidate gets a fresh helper.

Nothing of the candidate runs as Python: its module must pass
`check_module` first. A module holds imports of triton, triton.language
(with its math and libdevice modules) and math, constants (numbers,
strings, booleans, None, tuples of those, Triton dtypes,
tl.constexpr(...) of those) and @triton.jit functions. Triton's front end
evaluates every name and attribute a kernel body uses, and calls any
Python callable it reaches, while it compiles; so every name a body uses
must be a parameter, a local, a module constant or jit function, a few
builtins Triton maps onto its language, or an imported name; every
attribute path from an imported module is resolved here and must stay in
the kernel language (no path through triton.language.core to Python's
builtins and os, no triton.compile or triton.runtime); a module itself
may only be named to reach what is in it (`tl.load`), never kept in a
variable, passed or returned; attributes of values (tensors, dtypes,
constexprs, the module's constants) must be attributes of Triton's
language types (`x.to`, `x.dtype`), never a private or dunder name,
`.format` or a jit function's internals; and nothing is assigned to an
attribute or an item. Python code that runs at import or while compiling
(file access, host-side caching, torch, patching Triton) is a channel for
reward hacks and sabotage, so it is refused with the line and the reason.

As a second line of defence the helper watches its own state: an audit
hook refuses new audit hooks, ctypes, sockets, processes other than
Triton's own tools, tracing and file access outside the interpreter,
Triton and the scratch directory, and `Integrity` checks after every
candidate (and quickly before) that Triton, the modules it uses and the
helper are as they were at start. A candidate that changed them is
refused and the helper exits after answering, to be restarted fresh.

The helper is confined by its parent (the worker's sandbox: no network,
files readable only in system and Python directories, writable only in
its scratch directory) and by resource limits set before it starts.
"""

import ast
import gc
import importlib
import importlib.util
import io
import itertools
import json
import operator
import os
import shutil
import signal
import sys
import threading
import time
import traceback
import types

# Modules a candidate may import (`import X`, `import X as Y`), and the
# only modules a kernel may reach through attributes: Triton's language,
# its math and libdevice externs, and Python's math. Triton's front end
# calls any Python callable a body names while it compiles, and every
# other module leads to Python itself (triton.language.core.builtins,
# ....knobs.os, triton.runtime, triton.compile), so a path through any
# other module is refused.
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
# What of the triton module itself a kernel module may use: the decorator
# (only as a decorator), two integer helpers and the language.
FROM_TRITON = {"language", "jit", "cdiv", "next_power_of_2"}
TRITON_IN_BODIES = {"language", "cdiv", "next_power_of_2"}
# Builtins a kernel body may name (Triton maps these onto its language or
# evaluates them on constants; `print` is its name for tl.device_print).
BUILTINS = {
    "range", "min", "max", "abs", "len", "int", "float", "bool", "isinstance",
    "tuple", "zip", "enumerate", "print",
}
# Python's builtins that a kernel might be tempted to call, named in the
# refusal (any other name that is not defined is refused too).
DENIED_NAMES = {
    "exec", "eval", "compile", "open", "getattr", "setattr", "delattr",
    "hasattr", "globals", "locals", "vars", "dir", "input", "breakpoint",
    "type", "object", "super", "memoryview", "help", "exit", "quit", "id",
    "classmethod", "staticmethod", "property", "callable", "format", "repr",
    "ascii", "iter", "next", "map", "filter", "sorted", "reversed",
}
# Names no parameter or local may take: Triton reads a local before its
# assignment as the builtin of that name (getattr and hasattr are among
# Triton's builtins), and the others would only hide a refusal.
UNBINDABLE = {
    "getattr", "hasattr", "setattr", "delattr", "exec", "eval", "compile", "open", "globals",
    "locals", "vars", "breakpoint", "input",
}
# Keyword arguments of @triton.jit(...) a candidate may give, with
# constant values (the others take Python callables).
JIT_KEYWORDS = {"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"}
# Attributes of values that never belong to a kernel, even where a Triton
# type has them: the IR handle and builder hook of a tensor or type, and
# what leads from a string or a jit function to Python.
DENIED_VALUE_ATTRS = {"handle", "to_ir", "format", "format_map", "fn", "src", "run", "warmup", "cache_key"}
# Node types that are not part of a kernel body.
REFUSED_IN_BODY = {
    ast.Global: "a `global` statement",
    ast.Nonlocal: "a `nonlocal` statement",
    ast.Import: "an import",
    ast.ImportFrom: "an import",
    ast.FunctionDef: "a nested function",
    ast.AsyncFunctionDef: "a nested function",
    ast.ClassDef: "a class",
    ast.Lambda: "a lambda",
    ast.Delete: "`del`",
    ast.Try: "`try`",
    ast.Raise: "`raise`",
    ast.SetComp: "a set comprehension",
    ast.DictComp: "a dict comprehension",
    ast.GeneratorExp: "a generator expression",
    ast.Yield: "`yield`",
    ast.YieldFrom: "`yield from`",
    ast.Await: "`await`",
    ast.AsyncFor: "`async for`",
    ast.AsyncWith: "`async with`",
    ast.Set: "a set",
    ast.Dict: "a dict",
}
for _name in ("TryStar", "Match"):
    if hasattr(ast, _name):
        REFUSED_IN_BODY[getattr(ast, _name)] = f"`{_name.lower()}`"
del _name
# Parameter types the helper passes to Triton (from the task's buffers
# and scalars).
TYPES = {
    "*fp16", "*bf16", "*fp32", "*fp64", "*i8", "*i16", "*i32", "*i64", "*u8",
    "*u16", "*u32", "*u64", "fp16", "bf16", "fp32", "fp64", "i1", "i8", "i16",
    "i32", "i64", "u8", "u16", "u32", "u64",
}
MAX_REASON = 1200
ALLOWED_SUMMARY = (
    "a kernel may use only triton.language (with its math and libdevice functions), "
    "triton.jit/cdiv/next_power_of_2 and math"
)
CONSTANT_SUMMARY = "numbers, strings, booleans, None, tuples, Triton dtypes, tl.constexpr(...)"
MISSING = object()


class Rejected(Exception):
    def __init__(self, stage, reason):
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


class Tainted(Exception):
    """The helper's own state changed: answer, then exit."""


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


def chain(node):
    """The head of `a.b.c` (any expression) and the attribute names after it."""
    attrs = []
    while isinstance(node, ast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node, attrs[::-1]


def shown(node):
    try:
        text = ast.unparse(node)
    except Exception:
        text = type(node).__name__
    return text if len(text) <= 80 else text[:77] + "..."


_VALUE_ATTRS = None


def value_attributes():
    """The attribute names a kernel may use on a value (a tensor, a dtype, a
    constexpr, a tuple, a range...): the public attributes of the classes
    of triton.language and the attributes their methods set on `self`,
    read from Triton's own sources, less a few that lead out of the
    language (the IR handle, `format`, a jit function's internals)."""
    global _VALUE_ATTRS
    if _VALUE_ATTRS is not None:
        return _VALUE_ATTRS
    import triton.language  # noqa: F401

    names = set()
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("triton.language"):
            continue
        for obj in list(vars(module).values()):
            if isinstance(obj, type) and obj.__module__ == module_name:
                names.update(a for a in dir(obj) if not a.startswith("_"))
        path = getattr(module, "__file__", None)
        if not path or not path.endswith(".py"):
            continue
        try:
            with open(path) as f:
                tree = ast.parse(f.read())
        except (OSError, SyntaxError):
            continue
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.ctx, ast.Store)
                and isinstance(node.value, ast.Name)
                and node.value.id == "self"
                and not node.attr.startswith("_")
            ):
                names.add(node.attr)
    _VALUE_ATTRS = frozenset(names - DENIED_VALUE_ATTRS)
    return _VALUE_ATTRS


def language_value(obj):
    """Whether `obj`, reached from an allowed module, is part of the kernel
    language: a number, string, boolean, None or tuple of those, or a
    function, class or value of triton.language (or of Python's math)."""
    if obj is None or type(obj) in (int, float, bool, str):
        return True
    if type(obj) is tuple:
        return all(language_value(e) for e in obj)
    import triton.language as tl

    if obj is tl.PropagateNan or isinstance(obj, tl.PropagateNan):
        return True
    try:
        module = getattr(obj, "__module__", None)
    except Exception:
        return False
    return isinstance(module, str) and (module == "math" or module.startswith("triton.language"))


def constant_object(obj):
    """Whether `obj` (an imported name or a resolved attribute) may stand
    as a module constant or a default: numbers, strings, booleans, None,
    tuples of those, Triton dtypes and constexprs of those."""
    import triton.language as tl

    if obj is None or type(obj) in (int, float, bool, str, bytes):
        return True
    if type(obj) is tuple:
        return all(constant_object(e) for e in obj)
    if isinstance(obj, (tl.dtype, tl.PropagateNan)):
        return True
    if isinstance(obj, tl.constexpr):
        return constant_object(obj.value)
    return False


def describe(obj):
    if isinstance(obj, types.ModuleType):
        return f"the module {obj.__name__}"
    if isinstance(obj, type):
        return f"the class {getattr(obj, '__qualname__', obj.__name__)}"
    if callable(obj):
        return f"the function {getattr(obj, '__name__', type(obj).__name__)}"
    return f"a {type(obj).__name__}"


class ModuleChecker:
    """Refuse anything at module level but imports of the kernel language,
    constants and @triton.jit functions, then check every function's
    decorator, parameters, defaults, annotations and body."""

    def __init__(self, tree):
        self.tree = tree
        # Name bound by an import -> the object it stands for (a module
        # such as triton.language, or a function, class or value of it).
        self.imported = {}
        self.constants = set()
        self.functions = {}
        self.bound = {}

    # -- module level -------------------------------------------------

    def check(self):
        for stmt in self.tree.body:
            self.statement(stmt)
        for function in self.functions.values():
            self.body(function)

    def bind(self, name, where):
        if name.startswith("__"):
            raise Rejected("module", f"{where}: `{name}`: dunder names are not part of a kernel module")
        if name in self.bound:
            raise Rejected(
                "module",
                f"{where}: `{name}` is already bound at line {self.bound[name]}; a kernel module binds each name once",
            )
        self.bound[name] = int(where.split()[1])

    def statement(self, stmt):
        where = f"line {stmt.lineno}"
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return  # a docstring
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if alias.name not in REACHABLE_MODULES:
                    raise Rejected(
                        "module",
                        f"{where}: `import {alias.name}`: a kernel module imports only triton, "
                        "triton.language (with its math and libdevice modules) and math",
                    )
                module = importlib.import_module(alias.name)
                if alias.asname:
                    self.bind(alias.asname, where)
                    self.imported[alias.asname] = module
                else:
                    top = alias.name.split(".")[0]
                    if self.imported.get(top) is not sys.modules[top]:
                        self.bind(top, where)
                    self.imported[top] = sys.modules[top]
            return
        if isinstance(stmt, ast.ImportFrom):
            name = stmt.module or ""
            if stmt.level != 0 or name not in REACHABLE_MODULES:
                raise Rejected(
                    "module",
                    f"{where}: `from {'.' * stmt.level}{name} import ...`: a kernel module imports only from "
                    "triton, triton.language (with its math and libdevice modules) and math",
                )
            module = importlib.import_module(name)
            for alias in stmt.names:
                text = f"`from {name} import {alias.name}`"
                if alias.name == "*" or alias.name.startswith("_"):
                    raise Rejected("module", f"{where}: {text} is not allowed: import names one by one")
                if name == "triton" and alias.name not in FROM_TRITON:
                    raise Rejected(
                        "module",
                        f"{where}: {text} is not allowed: from triton a kernel module imports only "
                        "jit, cdiv, next_power_of_2 and language",
                    )
                obj = getattr(module, alias.name, MISSING)
                if obj is MISSING and f"{name}.{alias.name}" in REACHABLE_MODULES:
                    obj = importlib.import_module(f"{name}.{alias.name}")  # a submodule, as Python would
                if obj is MISSING:
                    raise Rejected("module", f"{where}: {text}: {name} has no `{alias.name}`")
                if isinstance(obj, types.ModuleType):
                    if obj.__name__ not in REACHABLE_MODULES:
                        raise Rejected(
                            "module",
                            f"{where}: {text}: `{alias.name}` is the module {obj.__name__}, which a kernel "
                            f"may not use; {ALLOWED_SUMMARY}",
                        )
                elif name != "triton" and not language_value(obj):
                    raise Rejected(
                        "module",
                        f"{where}: {text}: `{alias.name}` is {describe(obj)}, which is not part of the kernel language",
                    )
                self.bind(alias.asname or alias.name, where)
                self.imported[alias.asname or alias.name] = obj
            return
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            value = stmt.value
            if value is None or not all(isinstance(t, ast.Name) for t in targets):
                raise Rejected("module", f"{where}: only `NAME = constant` assignments are allowed")
            if isinstance(stmt, ast.AnnAssign):
                self.annotation(stmt.annotation, f"the annotation of `{targets[0].id}`")
            why = self.constant(value)
            if why is not None:
                raise Rejected(
                    "module",
                    f"{where}: `{targets[0].id}` must be a constant ({CONSTANT_SUMMARY}), not code that "
                    f"runs at import or a module: {why}",
                )
            for t in targets:
                self.bind(t.id, where)
                self.constants.add(t.id)
            return
        if isinstance(stmt, ast.FunctionDef):
            self.signature(stmt, where)
            self.bind(stmt.name, where)
            self.functions[stmt.name] = stmt
            return
        raise Rejected(
            "module",
            f"{where}: {type(stmt).__name__} at module level; a kernel module holds only imports, "
            "constants and @triton.jit functions",
        )

    def constant(self, node, lists=False):
        """None if `node` is a constant a module may bind (or a default may
        hold), else why not."""
        try:
            return self.constant_or_raise(node, lists)
        except Rejected as r:
            return r.reason.split(": ", 1)[1] if r.reason.startswith("line ") else r.reason

    def constant_or_raise(self, node, lists):
        if isinstance(node, ast.Constant):
            return None
        if isinstance(node, ast.Name):
            if node.id in self.constants or node.id in self.functions:
                return None
            obj = self.imported.get(node.id, MISSING)
            if obj is MISSING:
                return f"`{node.id}` is not a constant defined above"
            if constant_object(obj):
                return None
            return f"`{node.id}` is {describe(obj)}, not a constant"
        if isinstance(node, ast.Tuple) or (lists and isinstance(node, ast.List)):
            for e in node.elts:
                why = self.constant(e, lists)
                if why is not None:
                    return why
            return None
        if isinstance(node, ast.UnaryOp):
            return self.constant(node.operand, lists)
        if isinstance(node, ast.BinOp):
            return self.constant(node.left, lists) or self.constant(node.right, lists)
        if isinstance(node, ast.Attribute):
            head, _ = chain(node)
            if not (isinstance(head, ast.Name) and head.id in self.imported):
                return f"`{shown(node)}` is not a Triton dtype or a math constant"
            obj = self.resolve(node, node.lineno, decorator=False)
            if constant_object(obj):
                return None
            return f"`{shown(node)}` is {describe(obj)}, not a constant"
        if isinstance(node, ast.Call):
            head, _ = chain(node.func)
            import triton.language as tl

            func = MISSING
            if isinstance(head, ast.Name) and head.id in self.imported:
                func = self.resolve(node.func, node.lineno, decorator=False)
            if func is not tl.constexpr:
                return f"`{shown(node)}` calls {shown(node.func)}; only tl.constexpr(constant) is a constant"
            if node.keywords or len(node.args) > 1:
                return f"`{shown(node)}`: tl.constexpr takes one constant"
            for a in node.args:
                why = self.constant(a, lists)
                if why is not None:
                    return why
            return None
        kind = {
            ast.Dict: "a dict (mutable state)",
            ast.List: "a list (mutable state)",
            ast.Set: "a set (mutable state)",
            ast.Lambda: "a lambda",
            ast.ListComp: "a comprehension",
            ast.SetComp: "a comprehension",
            ast.DictComp: "a comprehension",
            ast.GeneratorExp: "a generator",
            ast.Compare: "a comparison",
            ast.BoolOp: "a boolean expression",
            ast.IfExp: "a conditional expression",
            ast.Subscript: "a subscript",
            ast.JoinedStr: "an f-string",
            ast.NamedExpr: "an assignment expression",
        }.get(type(node), "an expression that runs at import")
        return f"`{shown(node)}` is {kind}, not a constant"

    def annotation(self, node, what):
        where = f"line {node.lineno}"
        head, _ = chain(node)
        if not (isinstance(head, ast.Name) and head.id in self.imported):
            raise Rejected("module", f"{where}: {what} must be tl.constexpr or a Triton type, not `{shown(node)}`")
        obj = self.resolve(node, node.lineno, decorator=False)
        if isinstance(obj, types.ModuleType) or not language_value(obj):
            raise Rejected(
                "module", f"{where}: {what} must be tl.constexpr or a Triton type; `{shown(node)}` is {describe(obj)}"
            )

    def signature(self, fn, where):
        import triton

        decorators = fn.decorator_list
        ok = len(decorators) == 1
        if ok:
            d = decorators[0]
            target = d.func if isinstance(d, ast.Call) else d
            head, _ = chain(target)
            ok = isinstance(head, ast.Name) and head.id in self.imported
            if ok:
                ok = self.resolve(target, d.lineno, decorator=True) is triton.jit
            if ok and isinstance(d, ast.Call):
                if d.args:
                    raise Rejected("module", f"{where}: @triton.jit(...) of `{fn.name}` takes keyword arguments only")
                for kw in d.keywords:
                    if kw.arg not in JIT_KEYWORDS:
                        raise Rejected(
                            "module",
                            f"{where}: @triton.jit({kw.arg or '**'}=...) is not allowed; a kernel may give only "
                            f"{', '.join(sorted(JIT_KEYWORDS))}",
                        )
                    why = self.constant(kw.value, lists=True)
                    if why is not None:
                        raise Rejected(
                            "module",
                            f"{where}: @triton.jit({kw.arg}=...) of `{fn.name}` must be a constant: {why}",
                        )
        if not ok:
            raise Rejected("module", f"{where}: `{fn.name}` must be decorated with exactly @triton.jit")
        args = fn.args
        if args.vararg or args.kwarg or args.posonlyargs:
            raise Rejected("module", f"{where}: `{fn.name}` takes *args or **kwargs")
        for arg in args.args + args.kwonlyargs:
            self.local_name(arg.arg, f"line {arg.lineno}", "a parameter")
            if arg.annotation is not None:
                self.annotation(arg.annotation, f"the annotation of `{arg.arg}`")
        for default in args.defaults + [d for d in args.kw_defaults if d is not None]:
            why = self.constant(default)
            if why is not None:
                raise Rejected(
                    "module",
                    f"line {default.lineno}: a default of `{fn.name}` must be a constant ({CONSTANT_SUMMARY}): {why}",
                )
        if fn.returns is not None:
            self.annotation(fn.returns, f"the return annotation of `{fn.name}`")

    def local_name(self, name, where, what):
        if name.startswith("__"):
            raise Rejected("module", f"{where}: `{name}`: dunder names are not part of a kernel")
        if name in UNBINDABLE:
            raise Rejected("module", f"{where}: `{name}` is not part of a kernel, not even as the name of {what}")
        if name in self.imported:
            raise Rejected(
                "module",
                f"{where}: {what} named `{name}` would hide the imported `{name}`; choose another name",
            )

    # -- attribute paths ----------------------------------------------

    def resolve(self, node, lineno, decorator):
        """The object `node` (a name bound by an import, then attributes)
        stands for, checked at every step: modules on the way must be
        ones a kernel may reach, what they hold must be part of the
        language, and attributes after the first value must be
        attributes of Triton's language types. MISSING where a step
        cannot be resolved (Triton reports that)."""
        import triton
        import triton.language as tl

        head, attrs = chain(node)
        where = f"line {lineno}"
        path = head.id
        obj = self.imported[head.id]
        if isinstance(obj, types.ModuleType) and obj.__name__ not in REACHABLE_MODULES:
            raise Rejected("module", f"{where}: `{head.id}` is the module {obj.__name__}, which a kernel may not use")
        for attr in attrs:
            path = f"{path}.{attr}"
            if attr.startswith("__"):
                raise Rejected("module", f"{where}: `{path}`: `{attr}` is not part of a kernel")
            if attr.startswith("_"):
                raise Rejected("module", f"{where}: `{path}`: private names are not part of a kernel")
            if isinstance(obj, types.ModuleType):
                if obj is triton:
                    allowed = FROM_TRITON if decorator else TRITON_IN_BODIES
                    if attr not in allowed:
                        raise Rejected(
                            "module",
                            f"{where}: `{path}` is not part of a kernel: of triton itself a kernel module uses only "
                            "triton.jit (as its decorator), triton.cdiv, triton.next_power_of_2 and triton.language",
                        )
                nxt = getattr(obj, attr, MISSING)
                if nxt is MISSING:
                    obj = MISSING
                    continue
                if isinstance(nxt, types.ModuleType):
                    if nxt.__name__ not in REACHABLE_MODULES:
                        raise Rejected(
                            "module",
                            f"{where}: `{path}` reaches the module {nxt.__name__}; {ALLOWED_SUMMARY}",
                        )
                elif obj is not triton and not language_value(nxt):
                    raise Rejected(
                        "module",
                        f"{where}: `{path}` is {describe(nxt)}, which is not part of the kernel language",
                    )
                obj = nxt
            elif obj is tl.PropagateNan and attr in ("ALL", "NONE"):
                obj = getattr(obj, attr)
            else:
                if attr not in value_attributes():
                    raise Rejected(
                        "module",
                        f"{where}: `{path}`: `{attr}` is not an attribute of Triton's tensors, types or values",
                    )
                obj = MISSING
        return obj

    # -- bodies -------------------------------------------------------

    def body(self, fn):
        import triton

        params = {a.arg for a in fn.args.args + fn.args.kwonlyargs}
        local = set(params)
        parents = {}
        nodes = []

        def visit(node):
            kind = REFUSED_IN_BODY.get(type(node))
            if kind is not None:
                line = getattr(node, "lineno", None) or fn.lineno
                raise Rejected("module", f"line {line}: {kind} is not allowed in a kernel")
            # Children first, in source order: the innermost step of a
            # path (`tl.core` of `tl.core.builtins.open`) is the reason.
            for child in ast.iter_child_nodes(node):
                parents[child] = node
                visit(child)
            nodes.append(node)

        for stmt in fn.body:
            visit(stmt)
        for node in nodes:
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                local.add(node.id)
        for node in nodes:
            where = f"line {getattr(node, 'lineno', None) or getattr(parents.get(node), 'lineno', fn.lineno)}"
            if isinstance(node, ast.Name):
                self.name(node, where, local, parents)
            elif isinstance(node, ast.Attribute):
                self.attribute(node, where, local, parents, triton)
            elif isinstance(node, ast.Subscript) and not isinstance(node.ctx, ast.Load):
                raise Rejected(
                    "module",
                    f"{where}: assigning to `{shown(node)}` is not allowed in a kernel: only local names are assigned",
                )

    def name(self, node, where, local, parents):
        name = node.id
        if name.startswith("__"):
            raise Rejected("module", f"{where}: `{name}` is not part of a kernel")
        if not isinstance(node.ctx, ast.Load):
            self.local_name(name, where, "a local")
            return
        if name in local:
            return
        if name in DENIED_NAMES or name in UNBINDABLE:
            raise Rejected(
                "module",
                f"{where}: `{name}` is not part of a kernel: it is Python's, and Triton would run it while compiling",
            )
        if name in self.constants or name in self.functions or name in BUILTINS:
            return
        if name in self.imported:
            import triton

            obj = self.imported[name]
            if obj is triton.jit:
                raise Rejected("module", f"{where}: `{name}` (triton.jit) is only a decorator")
            if isinstance(obj, types.ModuleType) and not self.attribute_base(node, parents):
                raise Rejected(
                    "module",
                    f"{where}: `{name}` is the module {obj.__name__}: a kernel may name what is in a module "
                    "(as in `tl.load`), not keep, pass or return the module itself",
                )
            return
        raise Rejected(
            "module",
            f"line {node.lineno}: `{name}` is not a parameter, a local, a module constant, "
            "a jit function, tl, triton or math",
        )

    @staticmethod
    def attribute_base(node, parents):
        parent = parents.get(node)
        return isinstance(parent, ast.Attribute) and parent.value is node

    def attribute(self, node, where, local, parents, triton):
        path = shown(node)
        if node.attr.startswith("__"):
            raise Rejected("module", f"{where}: `{node.attr}` is not part of a kernel")
        if node.attr.startswith("_"):
            raise Rejected("module", f"{where}: `{path}`: private names are not part of a kernel")
        if not isinstance(node.ctx, ast.Load):
            raise Rejected(
                "module",
                f"{where}: assigning to `{path}` is not allowed in a kernel: only local names are assigned",
            )
        head, _ = chain(node)
        if isinstance(head, ast.Name) and head.id not in local:
            if head.id in self.imported:
                obj = self.resolve(node, int(where.split()[1]), decorator=False)
                if obj is triton.jit:
                    raise Rejected("module", f"{where}: `{path}` is only a decorator")
                if isinstance(obj, types.ModuleType) and not self.attribute_base(node, parents):
                    raise Rejected(
                        "module",
                        f"{where}: `{path}` is the module {obj.__name__}: a kernel may name what is in it, "
                        "not keep, pass or return the module itself",
                    )
                return
            if head.id in self.functions:
                raise Rejected(
                    "module",
                    f"{where}: `{path}`: a jit function is called or passed, its attributes are not part of a kernel",
                )
        if node.attr not in value_attributes():
            raise Rejected(
                "module",
                f"{where}: `{path}`: `{node.attr}` is not an attribute of Triton's tensors, types or values",
            )


def check_module(tree):
    ModuleChecker(tree).check()


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
        # JSON values: numbers, strings, booleans and None as they are,
        # anything else (a dtype) as its text.
        "constexprs": {k: v if v is None or type(v) in (int, float, bool, str) else str(v) for k, v in constexprs.items()},
        # The candidate's names for the task's arguments, in order: its
        # grid directive uses them.
        "arg_names": [p.name for p in runtime],
    }


# -- the helper's own integrity ------------------------------------------

# Stdlib modules the helper and Triton's compile path rely on, besides
# every triton module.
WATCHED_STDLIB = (
    "builtins", "sys", "os", "posixpath", "io", "json", "json.encoder", "json.decoder", "ast", "importlib",
    "importlib.util", "importlib.machinery", "shutil", "time", "traceback", "types", "tempfile",
    "subprocess", "functools", "inspect", "hashlib", "threading", "linecache", "copy", "re",
    "textwrap", "warnings", "contextlib", "dataclasses", "typing", "collections", "abc", "__main__",
)
# Entries that change while compiling honest kernels: the stream the
# helper swaps around a compile, lazily filled caches and counters.
VOLATILE = {
    ("sys", "stdout"), ("sys", "stderr"), ("sys", "last_type"), ("sys", "last_value"),
    ("sys", "last_traceback"), ("sys", "last_exc"), ("builtins", "_"), ("__main__", "_VALUE_ATTRS"),
    ("linecache", "cache"),
}
# copyreg caches a class's slot names in its dict the first time one of
# its objects is copied.
VOLATILE_CLASS_ATTRS = frozenset({"__slotnames__"})
VOLATILE_INSTANCE_ATTRS = {"hash", "used_global_vals", "device_caches", "kernel", "_hash_lock", "cache"}


class Integrity:
    """A snapshot of what later candidates depend on, taken at start after
    a warm-up compile: every triton module's and the watched stdlib
    modules' globals, the dicts of their classes, the code, defaults and
    closures of their functions, the state of objects they hold (Triton's
    knobs, the language's jit functions), os.environ, the import system
    and the thread count. `changed()` names the first difference, or
    None. A candidate that cannot run Python changes none of it."""

    def __init__(self):
        self.dicts = []  # (label, live mapping, snapshot, keys that may change)
        self.functions = []  # (label, function, code, defaults, kwdefaults, cells)
        self.classes = []  # (label, class, bases)
        self.lists = []  # (label, live list, snapshot)
        seen = set()
        self.protected = set()
        names = sorted(n for n in sys.modules if n == "triton" or n.startswith("triton."))
        for name in list(names) + [n for n in WATCHED_STDLIB if n in sys.modules]:
            module = sys.modules.get(name)
            if not isinstance(module, types.ModuleType):
                continue
            volatile = {k for (m, k) in VOLATILE if m == name}
            self.add_dict(name, vars(module), volatile)
            for key, obj in list(vars(module).items()):
                self.add_object(f"{name}.{key}", obj, name, seen)
        self.modules = {name: sys.modules[name] for name in names if name in sys.modules}
        self.environ = dict(os.environ)
        self.lists += [
            ("sys.path", sys.path, list(sys.path)),
            ("sys.meta_path", sys.meta_path, list(sys.meta_path)),
            ("sys.path_hooks", sys.path_hooks, list(sys.path_hooks)),
        ]
        self.threads = threading.active_count()
        self.gc_callbacks = list(gc.callbacks)
        self.signals = tuple((n, signal.getsignal(n)) for n in sorted(signal.valid_signals()) if n < signal.NSIG)
        self.freeze()

    def add_dict(self, label, live, volatile=frozenset()):
        self.dicts.append((label, live, dict(live), frozenset(volatile)))

    def add_function(self, label, fn, seen):
        if id(fn) in seen:
            return
        seen.add(id(fn))
        self.protected.add(id(fn))
        cells = tuple((c, c.cell_contents) for c in (fn.__closure__ or ()) if _cell_full(c))
        self.functions.append((label, fn, fn.__code__, fn.__defaults__, fn.__kwdefaults__, cells))
        if fn.__kwdefaults__:
            self.add_dict(f"{label}.__kwdefaults__", fn.__kwdefaults__)
        for _, contents in cells:
            if isinstance(contents, types.FunctionType):
                self.add_function(f"{label}.<closure>", contents, seen)

    def add_object(self, label, obj, module_name, seen):
        if isinstance(obj, types.FunctionType):
            self.add_function(label, obj, seen)
        elif isinstance(obj, type):
            if id(obj) in seen or getattr(obj, "__module__", None) != module_name:
                return
            seen.add(id(obj))
            self.protected.add(id(obj))
            self.classes.append((label, obj, obj.__bases__))
            self.add_dict(label, obj.__dict__, VOLATILE_CLASS_ATTRS)
            for key, member in list(obj.__dict__.items()):
                for f in _functions_of(member):
                    self.add_function(f"{label}.{key}", f, seen)
        elif not isinstance(obj, (types.ModuleType, types.BuiltinFunctionType)) and id(obj) not in seen:
            state = getattr(obj, "__dict__", None)
            mod = getattr(type(obj), "__module__", "") or ""
            if isinstance(state, dict) and mod.startswith("triton"):
                seen.add(id(obj))
                self.add_dict(label, state, VOLATILE_INSTANCE_ATTRS)
                fn = state.get("fn")
                if isinstance(fn, types.FunctionType):
                    self.add_function(f"{label}.fn", fn, seen)
                for key, member in list(state.items()):
                    if key not in VOLATILE_INSTANCE_ATTRS and not isinstance(member, (types.ModuleType, type)):
                        sub = getattr(member, "__dict__", None)
                        if isinstance(sub, dict) and (getattr(type(member), "__module__", "") or "").startswith(
                            "triton"
                        ):
                            self.add_object(f"{label}.{key}", member, module_name, seen)

    def freeze(self):
        """Flat tuples for `intact`, which compares them in C loops."""
        self.fast_dicts = tuple(
            (
                live,
                sum(1 for k in snap if k not in volatile),
                tuple(k for k in snap if k not in volatile),
                tuple(v for k, v in snap.items() if k not in volatile),
                tuple(volatile),
            )
            for _, live, snap, volatile in self.dicts
        )
        cells = [pair for f in self.functions for pair in f[5]]
        self.fast_cells = (tuple(c for c, _ in cells), tuple(v for _, v in cells))
        self.fast_classes = (tuple(c[1] for c in self.classes), tuple(c[2] for c in self.classes))

    def intact(self):
        """True where nothing the snapshot holds changed (fast; `changed`
        names what did)."""
        is_ = operator.is_
        for live, n, keys, values, volatile in self.fast_dicts:
            size = len(live)
            if volatile:
                size -= sum(map(live.__contains__, volatile))
            if size != n or not all(map(is_, map(live.get, keys, itertools.repeat(MISSING)), values)):
                return False
        # Not __code__, __defaults__ or __kwdefaults__: reading them is an
        # audit event (slow, one per function), and replacing them is
        # refused by the audit hook when it is tried (`Guard`).
        try:
            if not all(map(is_, map(operator.attrgetter("cell_contents"), self.fast_cells[0]), self.fast_cells[1])):
                return False
        except ValueError:
            return False
        classes, bases = self.fast_classes
        return all(map(is_, map(operator.attrgetter("__bases__"), classes), bases))

    def changed(self):
        if self.intact():
            return self.changed_elsewhere()
        for label, live, snap, volatile in self.dicts:
            added = sorted(k for k in live.keys() - snap.keys() - volatile if isinstance(k, str))
            if live.keys() - snap.keys() - volatile:
                return f"{label}.{added[0] if added else '?'} was added"
            for key, value in snap.items():
                if key in volatile:
                    continue
                if live.get(key, MISSING) is not value:
                    return f"{label}.{key} was replaced or removed"
        for label, fn, code, defaults, kwdefaults, cells in self.functions:
            if fn.__defaults__ is not defaults or fn.__kwdefaults__ is not kwdefaults:
                return f"the defaults of {label} were replaced"
            for cell, contents in cells:
                if not _cell_full(cell) or cell.cell_contents is not contents:
                    return f"a closure of {label} was changed"
        for label, cls, bases in self.classes:
            if cls.__bases__ is not bases:
                return f"the bases of {label} were changed"
        return self.changed_elsewhere() or "the helper's state"

    def changed_elsewhere(self):
        for label, live, snap in self.lists:
            if len(live) != len(snap) or any(a is not b for a, b in zip(live, snap)):
                return f"{label} was changed"
        for name, module in self.modules.items():
            if sys.modules.get(name) is not module:
                return f"sys.modules[{name!r}] was replaced"
        env = dict(os.environ)
        env.pop("TRITON_CACHE_DIR", None)
        snap = dict(self.environ)
        snap.pop("TRITON_CACHE_DIR", None)
        if env != snap:
            keys = sorted(set(env.items()) ^ set(snap.items()))[:1]
            return f"os.environ was changed ({keys[0][0] if keys else '?'})"
        if threading.active_count() != self.threads:
            return "a thread was started"
        if gc.callbacks != self.gc_callbacks:
            return "gc.callbacks was changed"
        for number, handler in self.signals:
            if signal.getsignal(number) is not handler:
                return f"the handler of signal {number} was changed"
        if sys.gettrace() is not None or sys.getprofile() is not None:
            return "a trace or profile function was set"
        if GUARD.violations:
            return GUARD.violations[0]
        return None


def _cell_full(cell):
    try:
        cell.cell_contents
        return True
    except ValueError:
        return False


def _functions_of(member):
    if isinstance(member, types.FunctionType):
        return [member]
    if isinstance(member, (staticmethod, classmethod)):
        f = member.__func__
        return [f] if isinstance(f, types.FunctionType) else []
    if isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if isinstance(f, types.FunctionType)]
    return []


class Guard:
    """An audit hook, installed after start: refuses what compiling a
    kernel never does (new audit hooks, ctypes, sockets, processes other
    than Triton's tools, tracing, patching the classes and functions the
    snapshot holds, files outside the interpreter, Triton and the
    scratch directory) and records each refusal, so that the request
    that caused it is refused and the helper restarted."""

    def __init__(self):
        self.violations = []
        self.active = False
        self.readable = ()
        self.tools = ()
        self.protected = frozenset()

    def configure(self, scratch, protected):
        import triton

        roots = {
            sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
            os.path.dirname(os.path.dirname(triton.__file__)), scratch,
        }
        for p in sys.path:
            if p:
                roots.add(p)
        resolved = set()
        for r in roots:
            resolved.add(os.path.abspath(r))
            resolved.add(os.path.realpath(r))
        self.readable = tuple(sorted(r.rstrip("/") + "/" for r in resolved if r not in ("/", ""))) + (
            "/dev/null", "/dev/urandom", "/proc/self/", f"/proc/{os.getpid()}/",
        )
        tools = {os.path.realpath(os.path.dirname(triton.__file__)) + "/"}
        for name in ("ptxas", "ptxas_blackwell", "cuobjdump", "nvdisasm"):
            try:
                tool = getattr(triton.knobs.nvidia, name)
                if tool is not None and tool.path:
                    tools.add(os.path.realpath(tool.path))
            except Exception:
                pass
        self.tools = tuple(sorted(tools))
        libdevice = os.environ.get("TRITON_LIBDEVICE_PATH")
        if libdevice:
            self.readable += (os.path.realpath(os.path.dirname(libdevice)) + "/",)
        self.protected = frozenset(protected)

    def refuse(self, what):
        message = f"the helper refused {what}"
        if len(self.violations) < 8:
            self.violations.append(message)
        raise PermissionError(message)

    def path_allowed(self, path):
        if isinstance(path, int):
            return True
        if isinstance(path, bytes):
            path = os.fsdecode(path)
        if not isinstance(path, str):
            return True
        full = os.path.realpath(os.path.abspath(path))
        return full in ("/dev/null", "/dev/urandom") or any(
            (full + "/").startswith(root) or full.startswith(root) for root in self.readable
        )

    def __call__(self, event, args):
        if event == "sys.addaudithook":
            raise RuntimeError("the helper admits no further audit hooks")
        if not self.active:
            return
        if event in ("open", "os.listdir", "os.scandir"):
            if args and not self.path_allowed(args[0]):
                self.refuse(f"{event}({args[0]!r})")
        elif event.startswith(("ctypes.", "socket.", "os.exec", "os.spawn", "pty.")):
            self.refuse(event)
        elif event in ("os.system", "os.fork", "os.forkpty", "os.kill", "os.killpg", "sys.settrace",
                       "sys.setprofile", "code.__new__"):
            self.refuse(event)
        elif event in ("subprocess.Popen", "os.posix_spawn", "os.posix_spawnp"):
            executable = args[0] if args else None
            if isinstance(executable, bytes):
                executable = os.fsdecode(executable)
            full = os.path.realpath(executable) if isinstance(executable, str) else ""
            if not full.startswith(self.tools):
                self.refuse(f"running {executable!r}")
        elif event in ("object.__setattr__", "object.__delattr__"):
            if args and id(args[0]) in self.protected:
                self.refuse(f"changing {getattr(args[0], '__qualname__', args[0])!r}.{args[1]}")


GUARD = Guard()


def warm_up(scratch):
    """Compile a small kernel once, so that what Triton imports and caches
    lazily is in place before the snapshot."""
    source = (
        "import triton\nimport triton.language as tl\n\n"
        "@triton.jit\ndef warm(x, y, n, B: tl.constexpr = 128):\n"
        "    i = tl.program_id(0) * B + tl.arange(0, B)\n"
        "    v = tl.load(x + i, mask=i < n)\n"
        "    tl.store(y + i, tl.sum(v, axis=0) + tl.math.sqrt(v.to(tl.float32)), mask=i < n)\n"
    )
    request = {
        "op": "compile",
        "source": source,
        "arch": 90,
        "kernels": [{"name": "warm", "params": [["x", "*fp32"], ["y", "*fp32"], ["n", "i32"]]}],
    }
    answer = handle(request, scratch, "warm", None)
    if not answer.get("ok"):
        raise RuntimeError(f"Triton cannot compile a test kernel here: {answer.get('reason')}")
    for k in answer["kernels"]:
        os.remove(k["cubin"])


def handle(request, scratch, serial, integrity):
    op = request.get("op")
    if op == "version":
        import triton

        return {"ok": True, "python": sys.version.split()[0], "triton": triton.__version__}
    if op != "compile":
        raise ValueError(f"unknown op {op!r}")
    start = time.perf_counter()
    spent = 0.0
    if integrity is not None:
        # The full check after the last request passed; since then only
        # code started asynchronously could run (a thread, a signal
        # handler, a gc callback, a trace function), which this quick
        # check sees. What it finds is not this candidate's doing.
        what = integrity.changed_elsewhere()
        if what is not None:
            raise Tainted(f"the helper's state changed before this request: {what}")
        spent = time.perf_counter() - start
    try:
        answer = compile_request(request, scratch, serial)
        answer["seconds"] = time.perf_counter() - start
    except Rejected as r:
        answer = {"ok": False, "stage": r.stage, "reason": r.reason}
    except Exception as e:
        answer = {"ok": False, "stage": "helper", "reason": trimmed(traceback.format_exc() or str(e))}
    if integrity is not None:
        checked = time.perf_counter()
        what = integrity.changed()
        answer["integrity_seconds"] = spent + time.perf_counter() - checked
        if what is not None:
            for k in answer.get("kernels", []):
                os.remove(k["cubin"])
            return {
                "ok": False,
                "stage": "module",
                "reason": trimmed(
                    f"compiling this module changed the compiler's own state ({what}); a kernel module "
                    "may not run Python or patch Triton. The module is refused."
                ),
                "restart": True,
            }
    return answer


def compile_request(request, scratch, serial):
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
        return {"ok": True, "kernels": out}
    finally:
        sys.modules.pop(f"kevo_candidate_{serial}", None)
        shutil.rmtree(work, ignore_errors=True)


def main():
    scratch = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.getcwd())
    protocol = sys.stdout
    sys.stdout = sys.stderr  # anything printed by Triton goes to stderr
    integrity = None
    failure = None
    try:
        import tempfile

        tempfile.tempdir = scratch  # ptxas's input and log files
        import triton  # noqa: F401
        import triton.language  # noqa: F401

        value_attributes()
        warm_up(scratch)
        integrity = Integrity()
        GUARD.configure(scratch, integrity.protected)
        sys.addaudithook(GUARD)
        GUARD.active = True
        integrity.add_dict("the helper's audit hook", vars(GUARD))
        integrity.freeze()
    except Exception as e:
        failure = trimmed(traceback.format_exc() or str(e))
    for serial, line in enumerate(sys.stdin):
        if not line.strip():
            continue
        restart = False
        try:
            if failure is not None:
                answer = {"ok": False, "stage": "helper", "reason": failure}
            else:
                answer = handle(json.loads(line), scratch, serial, integrity)
                restart = bool(answer.get("restart"))
        except Tainted as t:
            answer = {"ok": False, "stage": "helper", "reason": str(t), "restart": True}
            restart = True
        except Rejected as r:
            answer = {"ok": False, "stage": r.stage, "reason": r.reason}
        except Exception as e:
            answer = {"ok": False, "stage": "helper", "reason": trimmed(traceback.format_exc() or str(e))}
        try:
            text = json.dumps(answer)
        except (TypeError, ValueError) as e:
            text = json.dumps({"ok": False, "stage": "helper", "reason": f"an answer that is not JSON: {e}"})
        protocol.write(text + "\n")
        protocol.flush()
        if restart:
            os._exit(3)


if __name__ == "__main__":
    main()
