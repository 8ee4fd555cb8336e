"""Generate the API reference from the package's public names at build time.

One page per public module of ``probing`` (a module path without a part that starts with ``_``), found by
walking the package, so modules that move or appear need no edit here. A page lists the module's public
classes, functions and exceptions (its ``__all__`` where it has one, else every name without a leading
underscore) that are *defined* there, or in a private module and re-exported there: each object is documented
once, where it lives, and a package's re-exports link to that place. The pages are written to ``docs/api/``
(not versioned) on every build.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from functools import cache
from pathlib import Path
from types import ModuleType

from sphinx.util import logging

logger = logging.getLogger(__name__)

PACKAGE = "probing"


def _private(modname: str) -> bool:
    return any(part.startswith("_") for part in modname.split("."))


def public_modules() -> list[str]:
    """Every public module of the package, sorted."""
    pkg = importlib.import_module(PACKAGE)
    names = [PACKAGE]
    for info in pkgutil.walk_packages(pkg.__path__, f"{PACKAGE}."):
        if not _private(info.name):
            names.append(info.name)
    return sorted(names)


def _candidates(mod: ModuleType) -> list[str]:
    names = getattr(mod, "__all__", None)
    if names is None:
        names = [n for n in vars(mod) if not n.startswith("_")]
    return [n for n in names if not n.startswith("_")]


@cache
def _private_homes() -> dict[int, str]:
    """id(object) -> the one public module that documents an object defined in a private module: the first
    that lists it in ``__all__``, else the shortest-named one that imports it."""
    found: dict[int, list[tuple[bool, str]]] = {}
    for modname in public_modules():
        mod = importlib.import_module(modname)
        listed = set(getattr(mod, "__all__", ()))
        for name in _candidates(mod):
            obj = getattr(mod, name, None)
            home = getattr(obj, "__module__", "") or ""
            if (inspect.isclass(obj) or inspect.isfunction(obj)) and home.startswith(f"{PACKAGE}.") and _private(home):
                found.setdefault(id(obj), []).append((name not in listed, modname))
    return {k: min(v, key=lambda t: (t[0], len(t[1]), t[1]))[1] for k, v in found.items()}


def _module_data(mod: ModuleType) -> list[str]:
    """Public names assigned at the top level of the module's own source (constants, registries)."""
    try:
        tree = ast.parse(inspect.getsource(mod))
    except (OSError, TypeError):
        return []
    names: list[str] = []
    for node in tree.body:
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        for t in targets:
            if isinstance(t, ast.Name) and not t.id.startswith("_") and t.id not in names:
                names.append(t.id)
    return names


def members(modname: str) -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """(kind -> names documented on this module's page, [(name, canonical path)] of re-exports)."""
    mod = importlib.import_module(modname)
    own: dict[str, list[str]] = {"class": [], "exception": [], "function": [], "data": []}
    reexports: list[tuple[str, str]] = []
    candidates = _candidates(mod)
    for name in _module_data(mod):
        obj = getattr(mod, name, None)
        if name in candidates and not (inspect.isclass(obj) or inspect.isfunction(obj) or inspect.ismodule(obj)):
            alias = type(obj).__module__ in ("typing", "types", "typing_extensions")  # type aliases (State = ...)
            if name != "logger" and not alias and obj is not None:
                own["data"].append(name)
    for name in candidates:
        try:
            obj = getattr(mod, name)
        except AttributeError:
            continue
        if not (inspect.isclass(obj) or _isfunction(obj)):
            continue
        home = getattr(obj, "__module__", "") or ""
        if not (home == PACKAGE or home.startswith(f"{PACKAGE}.")):
            continue
        if _private(home) and _private_homes().get(id(obj)) != modname:
            reexports.append((name, f"{_private_homes().get(id(obj), home)}.{name}"))
            continue
        if home == modname or _private(home):
            if inspect.isclass(obj) and issubclass(obj, BaseException):
                own["exception"].append(name)
            elif inspect.isclass(obj):
                own["class"].append(name)
            else:
                own["function"].append(name)
        else:
            reexports.append((name, f"{home}.{getattr(obj, '__qualname__', name)}"))
    return own, reexports


def _isfunction(obj) -> bool:
    """A function, also behind ``functools`` wrappers (``@cache``)."""
    return inspect.isfunction(obj) or (callable(obj) and inspect.isfunction(inspect.unwrap(obj)))


def _first_line(modname: str) -> str:
    doc = inspect.getdoc(importlib.import_module(modname)) or ""
    return doc.strip().splitlines()[0] if doc.strip() else ""


def module_page(modname: str) -> str:
    own, reexports = members(modname)
    title = f"``{modname}``"
    lines = [title, "=" * len(title), "", f".. automodule:: {modname}", "   :no-members:", ""]
    everything = [n for kind in ("class", "exception", "function", "data") for n in own[kind]]
    if everything:
        lines += [".. currentmodule:: " + modname, "", ".. autosummary::", ""]
        lines += [f"   {n}" for n in everything] + [""]
    if reexports:
        lines += ["Also importable from here: " + ", ".join(f":py:obj:`~{path}`" for _, path in reexports), ""]
    for n in own["class"]:
        lines += [f".. autoclass:: {n}", "   :members:", "   :show-inheritance:", ""]
    for n in own["exception"]:
        lines += [f".. autoexception:: {n}", "   :show-inheritance:", ""]
    for n in own["function"]:
        lines += [f".. autofunction:: {n}", ""]
    for n in own["data"]:
        lines += [f".. autodata:: {n}", "   :no-value:", ""]
    return "\n".join(lines)


def index_page(modules: list[str]) -> str:
    lines = [
        "API reference",
        "=============",
        "",
        "Every public module of ``probing`` and, on its page, every public class and function it defines, with",
        "its numpydoc sections (parameters with their shapes, returns, examples). The pages are generated at",
        "build time from the package itself (``docs/_ext/apiref.py``): a module that moves or appears is",
        "listed without an edit. Start with :py:func:`probing.experiment.helpers.probe_layers`,",
        ":py:func:`probing.experiment.runner.run_experiment`, :py:class:`probing.probes.linear.LinearProbeCV`",
        "and :py:class:`probing.store.reader.Store`.",
        "",
        ".. list-table::",
        "   :header-rows: 1",
        "   :widths: 30 70",
        "",
        "   * - module",
        "     - what it holds",
    ]
    for m in modules:
        lines += [f"   * - :doc:`{m}`", f"     - {_first_line(m) or ' '}"]
    lines += ["", ".. toctree::", "   :hidden:", "   :maxdepth: 1", ""] + [f"   {m}" for m in modules] + [""]
    return "\n".join(lines)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:  # unchanged pages keep their mtime
        path.write_text(text, encoding="utf-8")


def generate(out: Path) -> list[str]:
    out.mkdir(parents=True, exist_ok=True)
    modules = public_modules()
    wanted = {f"{m}.rst" for m in modules} | {"index.rst"}
    for stale in out.glob("*.rst"):
        if stale.name not in wanted:
            stale.unlink()
    for m in modules:
        _write(out / f"{m}.rst", module_page(m))
    _write(out / "index.rst", index_page(modules))
    return modules


def _on_builder_inited(app) -> None:
    generate(Path(app.srcdir) / "api")


def _skip_foreign(app, what, name, obj, skip, options):
    """Members a class gets from elsewhere (scikit-learn's ``set_*_request`` routing methods) are not ours."""
    home = getattr(obj, "__module__", None)
    if isinstance(home, str) and not (home == PACKAGE or home.startswith(f"{PACKAGE}.")):
        return True
    return None


def _resolve_reexport(app, env, node, contnode):
    """A reference to a re-exported name (``probing.lm.sentence_scores``) resolves to where it is documented
    (``probing.lm.score.sentence_scores``): found by importing the target, else by its last name among the
    documented objects under the same package."""
    if node.get("refdomain") != "py":
        return None
    target = node.get("reftarget", "")
    if not target.startswith(f"{PACKAGE}."):
        return None
    domain = env.get_domain("py")
    canonical = _canonical(target)
    candidates = [canonical] if canonical else []
    parts = target.split(".")
    for depth in (2, 1):
        tail = ".".join(parts[-depth:])
        prefix = ".".join(parts[:-depth]) + "."
        candidates += sorted(n for n in domain.objects if n.endswith("." + tail) and n.startswith(prefix))
    for name in candidates:
        if name in domain.objects and name != target:
            new = node.deepcopy()
            new["reftarget"] = name
            return domain.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], name, new, contnode)
    if _exists(target):
        return contnode  # a real name without an entry of its own (a type alias, a dataclass field): plain text
    return None


def _exists(target: str) -> bool:
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            fields = getattr(obj, "__dataclass_fields__", {})
            if attr in fields or attr in getattr(obj, "__annotations__", {}):
                return True
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _canonical(target: str) -> str | None:
    parts = target.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:-1]:
                obj = getattr(obj, attr)
        except AttributeError:
            return None
        last = parts[-1]
        if inspect.ismodule(obj):
            inner = getattr(obj, last, None)
            home = getattr(inner, "__module__", None)
            qual = getattr(inner, "__qualname__", None)
            if (
                isinstance(home, str)
                and isinstance(qual, str)
                and (inspect.isclass(inner) or inspect.isfunction(inner))
            ):
                return f"{_private_homes().get(id(inner), home)}.{qual}"
            return None
        home, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if isinstance(home, str) and isinstance(qual, str):
            return f"{_private_homes().get(id(obj), home)}.{qual}.{last}"
        return None
    return None


_PARAM = re.compile(r"^([*\w][\w, *]*?)\s*(?::.*)?$")


def _check_parameters(app, what, name, obj, options, lines):
    """A docstring that has a numpydoc ``Parameters`` section names every parameter of the signature (an
    undocumented or misspelt parameter is a warning, so an error under ``-W``)."""
    if what == "data" and getattr(obj, "__doc__", None) == getattr(type(obj), "__doc__", None):
        lines[:] = []  # an instance's class docstring (numpy's dtype, a dict) says nothing of this constant
        return
    if what not in ("function", "method", "class") or not name.startswith(f"{PACKAGE}."):
        return
    doc = inspect.getdoc(obj) or ""
    if "\nParameters\n----------\n" not in "\n" + doc:
        return
    from numpydoc.docscrape import NumpyDocString

    try:
        entries = [n.strip().lstrip("*") for p in NumpyDocString(doc)["Parameters"] for n in p.name.split(",")]
        target = obj.__init__ if what == "class" else obj
        sig = inspect.signature(target)
    except (ValueError, TypeError):
        return
    documented = {e for e in entries if e.isidentifier()}
    # prose among the entries ("The other parameters are LinearProbe's.") delegates the rest to another page
    delegates = any("other parameters" in e.lower() for e in entries if not e.isidentifier())
    params = [p.name for p in sig.parameters.values() if p.name not in ("self", "cls")]
    missing = [] if delegates else [p for p in params if p not in documented]
    unknown = sorted(documented - set(params) - {"..."})
    if missing:
        logger.warning(
            f"{name}: Parameters does not document {missing}",
            location=_where(obj, name),
            type="apiref",
            subtype="param",
        )
    if unknown and not any(
        sig.parameters[p].kind is inspect.Parameter.VAR_KEYWORD for p in params if p in sig.parameters
    ):
        logger.warning(
            f"{name}: Parameters names {unknown}, not in the signature",
            location=_where(obj, name),
            type="apiref",
            subtype="param",
        )


def _where(obj, name: str) -> str:
    try:
        return f"{inspect.getsourcefile(inspect.unwrap(obj))}:docstring of {name}"
    except TypeError:
        return name


def setup(app):
    app.connect("builder-inited", _on_builder_inited)
    app.connect("autodoc-skip-member", _skip_foreign)
    app.connect("autodoc-process-docstring", _check_parameters)
    app.connect("missing-reference", _resolve_reexport)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
