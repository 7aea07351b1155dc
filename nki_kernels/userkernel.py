"""Load a user's NKI kernel named on the command line, as ``nki-kernels run`` loads a user's file.

``path/to/file.py:kernel`` or ``package.module:kernel``.  The file's imports decide which NKI API
aliases are installed before it is imported (``import nki`` -> the interpreter's NKI 0.7 front end,
``import neuronxcc`` -> its NKI 0.1 front end, both if both), so an unmodified kernel file finds
its ``nki`` / ``neuronxcc.nki`` on a laptop.  The aliases stay installed until :meth:`close` (the
kernel's body looks names up while it runs).

Every way this can go wrong before the kernel runs (no such file, a syntax error, an import that
fails, no such name, a name that is not an NKI kernel, the wrong number of array arguments) is a
:class:`~nki_kernels.usage.UsageError` with one line saying which.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.util
import inspect
import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any

from nki_kernels.lifecycle import Interrupted
from nki_kernels.sim import install_neuronxcc_alias, install_nki_alias
from nki_kernels.sim.nki07 import Kernel as Kernel07
from nki_kernels.sim.runner import Kernel as Kernel01
from nki_kernels.usage import UsageError


def is_file_target(module_part: str) -> bool:
    """``a/b.py`` or ``b.py`` (a file), as opposed to ``package.module``."""
    return module_part.endswith(".py") or os.sep in module_part or "/" in module_part


def split_target(target: str) -> tuple[str, str]:
    """``'x/k.py:fn'`` -> ``('x/k.py', 'fn')``; UsageError if either part is missing."""
    left, sep, name = target.rpartition(":")
    if not sep or not left or not name:
        raise UsageError(f"{target!r}: expected path/to/file.py:kernel or package.module:kernel")
    if not name.isidentifier():
        raise UsageError(f"{target!r}: {name!r} is not a Python name")
    return left, name


def kernel_api(obj: Any) -> str | None:
    """ "0.1" or "0.7" if ``obj`` is an NKI kernel the interpreter runs (``@nki.jit`` of either
    API, ``kernel[grid]``, a project host entry), else None."""
    try:
        api = getattr(obj, "nki_api", None)
    except Exception:  # noqa: BLE001 - e.g. the interpreter's modules raise E100 for any unknown name
        api = None
    if api in ("0.1", "0.7"):
        return str(api)
    if isinstance(obj, Kernel07):
        return "0.7"
    if isinstance(obj, Kernel01):
        return "0.1"
    return None


def python_function(obj: Any) -> Any:
    """The Python function whose parameters a kernel object takes: a host entry's ``prepare``, a
    0.7 kernel's ``kernel_fn``, a 0.1 kernel's ``func``."""
    for attr in ("prepare", "kernel_fn", "func"):
        inner = getattr(obj, attr, None)
        if callable(inner):
            return inner
    return obj


def array_parameters(obj: Any) -> tuple[list[str], list[str]]:
    """(required positional parameter names, optional ones) of the kernel's Python function."""
    try:
        sig = inspect.signature(python_function(obj))
    except (TypeError, ValueError):
        return [], []
    pos = [p for p in sig.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return [p.name for p in pos if p.default is p.empty], [p.name for p in pos if p.default is not p.empty]


@dataclass
class LoadedKernel:
    """A kernel and the aliases installed for it (closed by :meth:`close`)."""

    target: str
    kernel: Any
    api: str
    aliases: tuple[str, ...]
    _stack: contextlib.ExitStack = field(default_factory=contextlib.ExitStack, repr=False)

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> LoadedKernel:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _source_of_module(module: str) -> tuple[str | None, str | None]:
    """(source text, file) of an importable module, without importing it (its parents are)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError) as exc:
        raise UsageError(f"module {module!r} cannot be found: {exc}") from None
    if spec is None:
        raise UsageError(f"no module named {module!r} (on sys.path; for a file give path/to/file.py)")
    origin = spec.origin if spec.has_location else None
    if origin and origin.endswith(".py") and os.path.isfile(origin):
        with open(origin, encoding="utf-8") as f:
            return f.read(), origin
    return None, origin


def apis_of_source(source: str) -> tuple:
    """The NKI API versions a Python source is written against, from its imports: "0.7" for
    ``import nki`` / ``from nki... import``, "0.1" for ``neuronxcc``; () if neither.  Raises
    SyntaxError for unparsable source."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        for n in names:
            top = n.split(".")[0]
            if top == "nki":
                found.add("0.7")
            elif top == "neuronxcc":
                found.add("0.1")
    return tuple(sorted(found))


def _apis(source: str | None, where: str) -> tuple[str, ...]:
    if source is None:
        return ()
    try:
        return apis_of_source(source)
    except SyntaxError as exc:
        raise UsageError(f"{where}: not valid Python: {exc.msg} (line {exc.lineno})") from None


def _install(stack: contextlib.ExitStack, apis: tuple[str, ...]) -> None:
    for api in apis:
        stack.enter_context(install_nki_alias() if api == "0.7" else install_neuronxcc_alias())


def _describe(obj: Any) -> str:
    if isinstance(obj, types.ModuleType):
        return "a module"
    if inspect.isclass(obj):
        return "a class"
    if inspect.isfunction(obj):
        return "a plain Python function (not decorated with @nki.jit)"
    return f"a {type(obj).__name__}"


def _kernels_in(module: types.ModuleType) -> list[str]:
    return sorted(n for n, v in vars(module).items() if not n.startswith("_") and kernel_api(v) is not None)


def _import_file(target: str, left: str, stack: contextlib.ExitStack) -> tuple[types.ModuleType, tuple[str, ...]]:
    path = os.path.abspath(left)
    if not os.path.exists(path):
        raise UsageError(f"{target!r}: no such file {left!r} (relative to {os.getcwd()})")
    if not os.path.isfile(path) or not path.endswith(".py"):
        raise UsageError(f"{target!r}: {left!r} is not a Python file")
    with open(path, encoding="utf-8") as f:
        apis = _apis(f.read(), left)
    _install(stack, apis)
    mod_name = f"_nki_kernels_user_{os.path.splitext(os.path.basename(path))[0]}"
    spec = importlib.util.spec_from_file_location(mod_name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"{target!r}: {left!r} cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    stack.callback(sys.modules.pop, mod_name, None)
    folder = os.path.dirname(path)
    sys.path.insert(0, folder)  # its sibling modules, as `python file.py` would see them
    stack.callback(_remove_from_path, folder)
    _guarded(target, left, lambda: spec.loader.exec_module(module))
    return module, apis


def _remove_from_path(folder: str) -> None:
    if folder in sys.path:
        sys.path.remove(folder)


def _import_module(target: str, left: str, stack: contextlib.ExitStack) -> tuple[types.ModuleType, tuple[str, ...]]:
    source, origin = _source_of_module(left)
    apis = _apis(source, origin or left)
    _install(stack, apis)
    return _guarded(target, left, lambda: importlib.import_module(left)), apis


def _guarded(target: str, what: str, run: Any) -> Any:
    """``run()``; any exception of the user's code (not Ctrl-C or another stopping signal) becomes one
    UsageError line."""
    try:
        return run()
    except (KeyboardInterrupt, Interrupted, UsageError):
        raise
    except BaseException as exc:  # noqa: BLE001 - whatever the user's module raises is reported in one line
        raise UsageError(f"{target!r}: importing {what} failed: {type(exc).__name__}: {exc}") from None


def load(target: str) -> LoadedKernel:
    """Import the file or module of ``target`` with the aliases it needs and return its kernel."""
    left, name = split_target(target)
    stack = contextlib.ExitStack()
    try:
        load_one = _import_file if is_file_target(left) else _import_module
        module, apis = load_one(target, left, stack)
        if not hasattr(module, name):
            found = _kernels_in(module)
            hint = f"its NKI kernels: {', '.join(found)}" if found else "it defines no @nki.jit kernel"
            raise UsageError(f"{target!r}: {left} has no {name!r}; {hint}")
        obj = getattr(module, name)
        api = kernel_api(obj)
        if api is None:
            raise UsageError(
                f"{target!r} is not an NKI kernel ({_describe(obj)}); profile takes a function decorated with "
                "@nki.jit (from neuronxcc.nki for NKI 0.1 or nki for NKI 0.7)"
            )
        return LoadedKernel(target, obj, api, apis, stack)
    except BaseException:
        stack.close()
        raise
