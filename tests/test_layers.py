"""The layers run one way: every import inside barrierflow points down the layer order.

Read statically (the AST of every module, imports inside functions and under
`TYPE_CHECKING` included), so a lazy import cannot hide an upward dependency.
The order, top to bottom (issue 9):

    testing     barrierflow.testing (harnesses for user functions over the real operators):
                nothing in barrierflow imports it
    facade      barrierflow/__init__.py, configuration/, functions.py, window.py, metrics.py,
                jobs.py, cli/ (the command line), chaos/ (the exactly-once self-check),
                state_processor/, nexmark/
    api         user-facing builders (DataStream, environment, async I/O, joins)
    cluster     JobMaster, Spark runner
    graph       transformations -> job graph
    runtime     tasks, operators, network
    checkpoint  coordinator, storage, metadata
    state       backends, key groups, state values
    connectors  source and sink contracts and implementations
    core        user-facing contracts: function classes, Duration, watermarks, ...
                serialization.py (PyFlink's schemas and encoders: connectors use them)
    leaves      errors.py, _fs.py, _clock.py, _scheduler.py, _envelope.py, _bytes.py

A module may import its own unit (package or leaf module) and any unit of a lower
layer. Modules of the same layer that are separate units (the facade modules, the
leaves) may import each other one way only.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "barrierflow"

LAYERS: tuple[tuple[str, ...], ...] = (
    ("testing",),
    (
        "barrierflow",
        "configuration",
        "functions",
        "window",
        "cli",
        "jobs",
        "chaos",
        "state_processor",
        "metrics",
        "nexmark",
    ),
    ("api",),
    ("cluster",),
    ("graph",),
    ("runtime",),
    ("checkpoint",),
    ("state",),
    ("connectors",),
    ("core", "serialization"),
    ("errors", "_fs", "_clock", "_scheduler", "_envelope", "_bytes"),
)
"""Units per layer, top first. A unit is a subpackage or a module of barrierflow; the
unit "barrierflow" is the package's own `__init__`."""

FACADE = LAYERS[1]
BELOW_THE_API = ("graph", "runtime", "checkpoint", "state", "connectors", "core")


@dataclass(frozen=True)
class Import:
    """One import statement's target, resolved to a barrierflow module."""

    path: str
    line: int
    source_unit: str
    target_module: str
    target_unit: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: imports {self.target_module}"


def _module_name(root: Path, file: Path) -> str:
    parts = list(file.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _unit(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _targets(node: ast.AST, module: str, is_package: bool, root: Path) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".")
        if not is_package:
            base.pop()
        base = base[: len(base) - (node.level - 1)]
        target = ".".join([*base, *([node.module] if node.module else [])])
    else:
        target = node.module or ""
    # `from barrierflow import _fs` imports the module barrierflow._fs.
    package_dir = root.joinpath(*target.split("."))
    submodules = [
        f"{target}.{alias.name}"
        for alias in node.names
        if (package_dir / f"{alias.name}.py").exists() or (package_dir / alias.name).is_dir()
    ]
    return submodules or [target]


def imports_between_units(root: Path = ROOT) -> list[Import]:
    """Every import in the package under `root` from one unit into another."""
    found = []
    for file in sorted((root / PACKAGE).rglob("*.py")):
        module = _module_name(root, file)
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for node in ast.walk(tree):
            for target in _targets(node, module, file.name == "__init__.py", root):
                if target != PACKAGE and not target.startswith(f"{PACKAGE}."):
                    continue
                source_unit, target_unit = _unit(module), _unit(target)
                if source_unit != target_unit:
                    path = file.relative_to(root).as_posix()
                    found.append(Import(path, node.lineno, source_unit, target, target_unit))
    return found


def _layer(unit: str) -> int:
    for index, units in enumerate(LAYERS):
        if unit in units:
            return index
    raise AssertionError(f"unit {unit!r} is in no layer: add it to LAYERS in {__file__}")


def upward_imports(found: list[Import]) -> list[Import]:
    """Imports into a higher layer."""
    return [i for i in found if _layer(i.target_unit) < _layer(i.source_unit)]


def imports_of_the_api_from_below(found: list[Import]) -> list[Import]:
    """Imports from the packages below the API into the API, the cluster, the CLI or facade."""
    above = {"api", "cluster", *FACADE}
    return [i for i in found if i.source_unit in BELOW_THE_API and i.target_unit in above]


def runtime_imports_of_the_graph(found: list[Import]) -> list[Import]:
    return [i for i in found if i.source_unit == "runtime" and i.target_unit == "graph"]


def mutual_imports(found: list[Import]) -> list[Import]:
    """Imports of a unit that imports the importing unit back (both directions listed)."""
    edges = {(i.source_unit, i.target_unit) for i in found}
    return [i for i in found if (i.target_unit, i.source_unit) in edges]


def _report(title: str, offending: list[Import]) -> str:
    return f"{title}:\n" + "\n".join(f"  {i}" for i in offending)


# ---- the contract ------------------------------------------------------------------------------


def test_nothing_below_the_api_imports_the_api_the_cluster_the_cli_or_the_facade() -> None:
    offending = imports_of_the_api_from_below(imports_between_units())
    assert not offending, _report("imports from below the API into it or above", offending)


def test_the_runtime_does_not_import_the_graph() -> None:
    offending = runtime_imports_of_the_graph(imports_between_units())
    assert not offending, _report("runtime/ imports graph/", offending)


def test_no_two_packages_import_each_other() -> None:
    offending = mutual_imports(imports_between_units())
    assert not offending, _report("units that import each other", offending)


def test_every_import_points_down_the_layer_order() -> None:
    offending = upward_imports(imports_between_units())
    assert not offending, _report("imports into a higher layer", offending)


def test_every_module_belongs_to_a_layer() -> None:
    units = {_unit(_module_name(ROOT, f)) for f in (ROOT / PACKAGE).rglob("*.py")}
    assert units <= {unit for layer in LAYERS for unit in layer}


def test_the_window_model_lives_below_the_runtime() -> None:
    """Windows have one type everywhere (issue 23): the runtime and core import the window
    model from `barrierflow.core.windows`, never from its public path `barrierflow.window`."""
    offending = [
        i
        for i in imports_between_units()
        if i.source_unit in ("runtime", "core") and i.target_module == f"{PACKAGE}.window"
    ]
    assert not offending, _report("imports of barrierflow.window below the facade", offending)
    assert (ROOT / PACKAGE / "core" / "windows" / "window.py").exists()


PUBLIC_TO_THE_CLI = (
    "barrierflow",
    "errors",
    "api",
    "chaos",
    "jobs",
    "state_processor",
    "nexmark",
)
"""What the command line may import: the facade (`barrierflow.jobs` for what it reads about
jobs from outside: the running jobs, a checkpoint folder, a stopped job's sinks), the user's
API and the chaos check. Issue 23: nothing below the API."""


def test_the_cli_imports_only_public_api_and_the_chaos_check() -> None:
    reached = sorted(
        str(i)
        for i in imports_between_units()
        if i.source_unit == "cli" and i.target_unit not in PUBLIC_TO_THE_CLI
    )
    assert reached == [], "the CLI reaches internals:\n" + "\n".join(reached)


def test_no_connector_and_no_nexmark_module_imports_the_chaos_package() -> None:
    offending = [
        i
        for i in imports_between_units()
        if i.source_unit in ("connectors", "nexmark") and i.target_unit == "chaos"
    ]
    assert not offending, _report("connectors or nexmark import the chaos check", offending)


def test_connectors_know_only_their_placement_hook_and_no_chaos_module() -> None:
    """A chaos run rebases outputs through connectors/placement.py, which the chaos package
    fills (chaos/run_placement.py): no module under connectors/ or nexmark/ imports a module
    whose name says chaos, wherever it lives (the engine's chaos_faults modules included)."""
    offending = [
        i
        for i in imports_between_units()
        if i.source_unit in ("connectors", "nexmark") and "chaos" in i.target_module
    ]
    assert not offending, _report("connectors or nexmark import chaos modules", offending)
    assert not (ROOT / PACKAGE / "_check_run.py").exists()


# ---- the checker itself ------------------------------------------------------------------------


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / PACKAGE / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return tmp_path


def test_the_checker_names_each_upward_import_by_file_and_line(tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "__init__.py": "",
            "_fs.py": "",
            "api/__init__.py": "",
            "api/datastream.py": "from barrierflow.runtime import task\n",
            "runtime/__init__.py": "",
            "runtime/task.py": (
                "from barrierflow import _fs\n\ndef later():\n    from ..api import datastream\n"
            ),
            "state/__init__.py": "",
            "state/values.py": "import barrierflow.runtime.task\n",
        },
    )
    found = imports_between_units(root)
    assert [str(i) for i in upward_imports(found)] == [
        "barrierflow/runtime/task.py:4: imports barrierflow.api.datastream",
        "barrierflow/state/values.py:1: imports barrierflow.runtime.task",
    ]
    assert [str(i) for i in mutual_imports(found)] == [
        "barrierflow/api/datastream.py:1: imports barrierflow.runtime.task",
        "barrierflow/runtime/task.py:4: imports barrierflow.api.datastream",
    ]
    assert [str(i) for i in imports_of_the_api_from_below(found)] == [
        "barrierflow/runtime/task.py:4: imports barrierflow.api.datastream",
    ]
    message = _report("imports into a higher layer", upward_imports(found))
    assert "barrierflow/state/values.py:1" in message


MACHINE_CLOCK_CALLS = {
    "time.time",
    "time.time_ns",
    "time.monotonic",
    "time.sleep",
    "datetime.now",
    "datetime.datetime.now",
}
"""Reading (or waiting on) the machine's clock directly: connectors take an injected `Clock`."""


def test_no_connector_reads_the_machine_clock_or_sleeps() -> None:
    offending = []
    for file in sorted((ROOT / PACKAGE / "connectors").rglob("*.py")):
        tree = ast.parse(file.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in MACHINE_CLOCK_CALLS:
                offending.append(f"{file.relative_to(ROOT).as_posix()}:{node.lineno}")
    assert not offending, offending


def test_nexmark_imports_no_private_connector_module() -> None:
    offending = [
        i
        for i in imports_between_units()
        if i.source_unit == "nexmark"
        and i.target_unit == "connectors"
        and any(part.startswith("_") for part in i.target_module.split("."))
    ]
    assert not offending, _report("nexmark/ imports private connector modules", offending)


# ---- inside cluster/: the driver split by role (issue 23) ------------------------------------

CLUSTER = ROOT / PACKAGE / "cluster"
CLUSTER_ROLES = ("jobmaster", "rest", "metrics", "spark", "executor")
JOBMASTER_SEEN_BY_THE_HTTP_LAYER = ("barrierflow.cluster.jobmaster.views",)
"""The JobMaster's read models: all the HTTP layer imports of the JobMaster (it acts on the
job through the `JobActions` Protocol it declares itself, rest/job_actions.py)."""


def _cluster_imports(role: str) -> list[tuple[str, int, str]]:
    """(file, line, imported module) of every barrierflow import in cluster/<role>/."""
    found = []
    for file in sorted((CLUSTER / role).rglob("*.py")):
        module = _module_name(ROOT, file)
        tree = ast.parse(file.read_text(encoding="utf-8"), filename=str(file))
        for node in ast.walk(tree):
            for target in _targets(node, module, file.name == "__init__.py", ROOT):
                found.append((file.relative_to(ROOT).as_posix(), node.lineno, target))
    return found


def test_cluster_is_split_by_role_with_at_most_a_dozen_modules_at_its_top() -> None:
    assert all((CLUSTER / role / "__init__.py").is_file() for role in CLUSTER_ROLES)
    assert len(list(CLUSTER.glob("*.py"))) <= 12


def test_the_package_keeps_at_most_a_dozen_modules_at_its_top() -> None:
    """Issue 23's size: a new public path with more than one idea is a package."""
    top = sorted(path.name for path in (ROOT / PACKAGE).glob("*.py"))
    assert len(top) <= 12, f"{len(top)} modules at barrierflow's top: {', '.join(top)}"


def test_the_http_layer_sees_only_the_jobmasters_read_models() -> None:
    offending = [
        f"{path}:{line}: imports {target}"
        for path, line, target in _cluster_imports("rest")
        if target.startswith("barrierflow.cluster.jobmaster")
        and target not in JOBMASTER_SEEN_BY_THE_HTTP_LAYER
    ]
    assert not offending, "rest/ reaches under the JobMaster's interface:\n" + "\n".join(offending)


def test_metrics_import_neither_the_jobmaster_nor_the_http_layer() -> None:
    offending = [
        f"{path}:{line}: imports {target}"
        for path, line, target in _cluster_imports("metrics")
        if target.startswith(("barrierflow.cluster.jobmaster", "barrierflow.cluster.rest"))
    ]
    assert not offending, "metrics/ imports the JobMaster or REST:\n" + "\n".join(offending)


TASK_AND_JOBMASTER_LINES = 450
"""The files that define StreamTask and JobMaster: the two classes a newcomer reads first."""
MODULE_LINES = 600
"""Any other module: past this, a module holds more than one idea (issue 23)."""
LARGER_MODULES = {
    # connectors, the Nexmark generator, the facade and the command line
    "barrierflow/connectors/delta.py": 1106,
    "barrierflow/connectors/postgres.py": 1046,
    "barrierflow/connectors/nats.py": 776,
    "barrierflow/nexmark/source.py": 741,
    "barrierflow/nexmark/generator.py": 632,
    "barrierflow/connectors/files/_sink.py": 618,
}
"""Modules over MODULE_LINES today, each with its size as its ceiling: the list may only
shrink, and a listed module may not grow."""


def test_modules_keep_the_sizes_the_project_set_itself() -> None:
    too_long = []
    for path in sorted((ROOT / PACKAGE).rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        text = path.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if "\nclass StreamTask(" in text or "\nclass JobMaster(" in text:
            limit = TASK_AND_JOBMASTER_LINES
        else:
            limit = LARGER_MODULES.get(name, MODULE_LINES)
        if lines > limit:
            too_long.append(f"{name}: {lines} lines, limit {limit}")
    assert not too_long, "split these by role:\n" + "\n".join(too_long)
