"""The error tree in `barrierflow.errors`' docstring is the class hierarchy: every
BarrierflowError subclass of the module is listed once, under its first base."""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import barrierflow.errors as errors
from barrierflow.errors import BarrierflowError


def tree_from_docstring() -> dict[str, str | None]:
    """Class name -> the name it is indented under (None for the root), as drawn."""
    doc = errors.__doc__ or ""
    parents: dict[str, str | None] = {}
    stack: list[tuple[int, str]] = []
    for line in doc.splitlines():
        match = re.match(r"^( *)([A-Z]\w*(?:Error|Failure))\b", line)
        if match is None:
            continue
        depth, name = len(match.group(1)), match.group(2)
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert name not in parents, f"{name} is listed twice"
        parents[name] = stack[-1][1] if stack else None
        stack.append((depth, name))
    return parents


def classes_of_the_module() -> dict[str, str | None]:
    """Class name -> its first BarrierflowError base (None for BarrierflowError itself)."""
    found: dict[str, str | None] = {}
    for name, value in vars(errors).items():
        if inspect.isclass(value) and issubclass(value, BarrierflowError):
            if value.__module__ != errors.__name__:
                continue
            bases = [base for base in value.__bases__ if issubclass(base, BarrierflowError)]
            found[name] = bases[0].__name__ if bases else None
    return found


def test_the_docstring_tree_lists_every_error_class_under_its_base():
    assert tree_from_docstring() == classes_of_the_module()


def test_no_barrierflow_error_is_defined_outside_the_error_module():
    """Read from the source (no imports): a class whose base is an error of the module, or
    of such a class, defined in another module of the package."""
    known = set(classes_of_the_module())
    package = Path(errors.__file__).parent
    found: list[tuple[Path, str, list[str]]] = []
    for path in sorted(package.rglob("*.py")):
        if path == Path(errors.__file__):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).rpartition(".")[2] for base in node.bases]
                found.append((path, node.name, bases))
    outside: set[str] = set()
    grew = True
    while grew:  # subclasses of subclasses defined elsewhere
        grew = False
        for _path, name, bases in found:
            if name not in outside and any(b in known for b in bases):
                outside.add(name)
                known.add(name)
                grew = True
    assert sorted(outside) == sorted(STILL_OUTSIDE)


STILL_OUTSIDE = (
    "Unreachable",  # runtime/network/handshake.py: a dial that found no one (internal)
)
"""Errors not in barrierflow/errors.py (the CLI's and the chaos check's moved in, issue 23).
The list may only shrink."""
