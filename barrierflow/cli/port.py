"""`barrierflow port FILE [-o OUT]`: a PyFlink DataStream job made a barrierflow job.

    barrierflow port job.py -o job_bf.py

It applies the porting rule (docs/porting.md) and nothing else: only import statements and
dotted `pyflink.` references change, token by token, so the file keeps its layout and
comments. Then it lists what the ported file uses that barrierflow lacks (a name no
barrierflow module has, a PyFlink module with no counterpart) or refuses when the job is built
(`porting_notes.REFUSED`), and what it accepts and ignores (`porting_notes.IGNORED`). The ported
source goes to OUT (stdout without -o); the list goes to stderr. Exit status 1 when something
is unsupported, 0 otherwise (ignored names alone are no failure).
"""

from __future__ import annotations

import ast
import importlib
import io
import sys
import tokenize
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import click

from barrierflow.cli.porting_notes import IGNORED, REFUSED

__all__ = ["PortReport", "name_status", "port", "port_source", "target_module"]

ROOT_MODULES = frozenset(
    {
        "pyflink.datastream",
        "pyflink.common",
        "pyflink.common.typeinfo",
        "pyflink.common.time",
        "pyflink.common.watermark_strategy",
    }
)
"""PyFlink modules whose names barrierflow has at its top level."""
KEPT_DATASTREAM_PACKAGES = frozenset({"functions", "state", "window", "connectors", "formats"})
"""`pyflink.datastream.X[.Y]` -> `barrierflow.X[.Y]` for these X; any other module of
pyflink.datastream (data_stream, state_backend, ...) only holds names pyflink.datastream
exports, so it goes to `barrierflow`."""
KEPT_DATASTREAM_MODULES = frozenset({"async_retry_predicates", "async_retry_strategies"})
"""Modules PyFlink users import as modules (`from pyflink.datastream import
async_retry_predicates`): barrierflow has them under the same name."""


def target_module(module: str) -> str | None:
    """The barrierflow module the porting rule gives a PyFlink module (None: no rule).

    >>> target_module("pyflink.common.typeinfo"), target_module("pyflink.common.serialization")
    ('barrierflow', 'barrierflow.serialization')
    >>> target_module("pyflink.datastream.connectors.file_system")
    'barrierflow.connectors.file_system'
    >>> target_module("pyflink.datastream.state_backend"), target_module("pyflink.table")
    ('barrierflow', None)
    """
    if module in ROOT_MODULES:
        return "barrierflow"
    parts = module.split(".")
    if parts[:2] == ["pyflink", "common"]:
        return "barrierflow." + ".".join(parts[2:])
    if parts[:2] == ["pyflink", "datastream"] and len(parts) > 2:
        if parts[2] in KEPT_DATASTREAM_PACKAGES or parts[2] in KEPT_DATASTREAM_MODULES:
            return "barrierflow." + ".".join(parts[2:])
        return "barrierflow"
    return None


@cache
def pyflink_modules() -> frozenset[str]:
    """PyFlink's module names (from pyflink_names.txt, generated from an installed PyFlink)."""
    try:
        text = Path(__file__).with_name("pyflink_names.txt").read_text()
    except OSError:  # an install without the data file: module_prefix falls back to case
        return frozenset()
    return frozenset(line.split()[1] for line in text.splitlines() if line.startswith("module "))


def module_prefix(dotted: list[str]) -> int:
    """How many parts of a dotted `pyflink.` reference name a module: the longest prefix that
    is one of PyFlink's modules (else the leading lowercase parts)."""
    known = pyflink_modules()
    for n in range(len(dotted), 1, -1):
        if ".".join(dotted[:n]) in known:
            return n
    n = 1
    while n < len(dotted) and dotted[n].islower():
        n += 1
    return n


@dataclass(frozen=True)
class Finding:
    line: int
    text: str
    unsupported: bool


@dataclass
class PortReport:
    source: str
    """The ported source."""
    rewritten: int
    """How many `pyflink` references the rule rewrote."""
    findings: list[Finding]

    @property
    def unsupported(self) -> list[Finding]:
        return [f for f in self.findings if f.unsupported]


def port_source(source: str) -> PortReport:
    """Apply the rule to `source`, then check what the ported source imports.

    >>> report = port_source("from pyflink.common import Types  # types\\n")
    >>> report.source
    'from barrierflow import Types  # types\\n'
    """
    findings: list[Finding] = []
    tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    edits: list[tuple[tuple[int, int], tuple[int, int], str]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        previous = tokens[i - 1] if i else None
        after_dot = previous is not None and previous.type == tokenize.OP and previous.string == "."
        if token.type == tokenize.NAME and token.string == "pyflink" and not after_dot:
            dotted, j = ["pyflink"], i + 1
            while (
                j + 1 < len(tokens)
                and tokens[j].type == tokenize.OP
                and tokens[j].string == "."
                and tokens[j + 1].type == tokenize.NAME
            ):
                dotted.append(tokens[j + 1].string)
                j += 2
            n = module_prefix(dotted)
            module = ".".join(dotted[:n])
            target = target_module(module)
            if target is None:
                findings.append(
                    Finding(token.start[0], f"{module}: no barrierflow counterpart", True)
                )
            else:
                end = tokens[i + 2 * (n - 1)].end
                edits.append((token.start, end, target))
            i = j
            continue
        i += 1
    ported = apply_edits(source, edits)
    findings += check_names(ported)
    return PortReport(ported, len(edits), sorted(findings, key=lambda f: f.line))


def apply_edits(source: str, edits: list[tuple[tuple[int, int], tuple[int, int], str]]) -> str:
    """Replace each (start, end) token span (row from 1, column) by its text."""
    lines = source.splitlines(keepends=True)
    for (row, col), (end_row, end_col), text in sorted(edits, reverse=True):
        head, tail = lines[row - 1][:col], lines[end_row - 1][end_col:]
        lines[row - 1 : end_row] = [head + text + tail]
    return "".join(lines)


def check_names(source: str) -> list[Finding]:
    """What the ported source imports from barrierflow that is missing, refused or ignored."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return [Finding(error.lineno or 0, f"not Python: {error.msg}", True)]
    findings: list[Finding] = []
    aliases: dict[str, str] = {}  # local name -> barrierflow module it names
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module.split(".")[0] != "barrierflow":
                continue
            module = load(node.module)
            if module is None:
                findings.append(Finding(node.lineno, f"{node.module}: no such module", True))
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                if not has_name(node.module, alias.name):
                    findings.append(
                        Finding(
                            node.lineno, f"{node.module}.{alias.name}: not in barrierflow", True
                        )
                    )
                else:
                    findings += notes(node.lineno, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != "barrierflow":
                    continue
                if load(alias.name) is None:
                    findings.append(Finding(node.lineno, f"{alias.name}: no such module", True))
                elif alias.asname:
                    aliases[alias.asname] = alias.name
                else:
                    aliases["barrierflow"] = "barrierflow"
    for node in ast.walk(tree):  # attributes of imported modules: ds.Types, barrierflow.X.Y
        if isinstance(node, ast.Attribute):
            if node.attr in REFUSED or node.attr in IGNORED:  # env.add_jars(...)
                findings += notes(node.lineno, node.attr)
            dotted = dotted_name(node)
            if dotted and dotted[0] in aliases:
                findings += check_attribute(node.lineno, aliases[dotted[0]], dotted[1:])
    return dedupe(findings)


def check_attribute(line: int, module: str, rest: list[str]) -> list[Finding]:
    """`module.rest[0].rest[1]...`: the longest module prefix, then one name in it."""
    for n in range(len(rest), -1, -1):
        name = ".".join([module, *rest[:n]])
        if n and load(name) is None:
            continue
        if n == len(rest):
            return []
        attribute = rest[n]
        if has_name(name, attribute):
            return notes(line, attribute)
        return [Finding(line, f"{name}.{attribute}: not in barrierflow", True)]
    return []


def notes(line: int, name: str) -> list[Finding]:
    if name in REFUSED:
        return [Finding(line, f"{name}: refused when the job is built ({REFUSED[name]})", True)]
    if name in IGNORED:
        return [Finding(line, f"{name}: accepted and ignored ({IGNORED[name]})", False)]
    return []


def dotted_name(node: ast.expr) -> list[str] | None:
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return [node.id, *reversed(parts)]
    return None


def load(module: str):
    try:
        return importlib.import_module(module)
    except ImportError:
        return None


def has_name(module: str, name: str) -> bool:
    loaded = load(module)
    return loaded is not None and (hasattr(loaded, name) or load(f"{module}.{name}") is not None)


def dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple[int, str]] = set()
    kept = []
    for finding in findings:
        if (finding.line, finding.text) not in seen:
            seen.add((finding.line, finding.text))
            kept.append(finding)
    return kept


@click.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the ported job here (default: standard output).",
)
def port(file: Path, output: Path | None) -> None:
    """Port a PyFlink DataStream job: rewrite its imports, list what barrierflow lacks."""
    try:
        report = port_source(file.read_text())
    except (OSError, UnicodeDecodeError, tokenize.TokenError, SyntaxError) as error:
        raise click.UsageError(f"cannot read {file}: {error}") from None
    if output is None:
        sys.stdout.write(report.source)
    else:
        output.write_text(report.source)
    for finding in report.findings:
        click.echo(f"{file}:{finding.line}: {finding.text}", err=True)
    missing = len(report.unsupported)
    click.echo(
        f"{file}: {report.rewritten} pyflink references rewritten"
        + (f" into {output}" if output else "")
        + (f"; {missing} unsupported" if missing else "; everything it imports is supported"),
        err=True,
    )
    if missing:
        sys.exit(1)


def name_status(module: str, name: str) -> tuple[str, str]:
    """A PyFlink name's status here, for docs/porting.md's table: ("supported", where),
    ("ignored", why), ("refused", the error) or ("missing", what an import raises).

    >>> name_status("pyflink.datastream", "StreamExecutionEnvironment")
    ('supported', 'barrierflow.StreamExecutionEnvironment')
    """
    target = target_module(module)
    if name in REFUSED:
        return "refused", REFUSED[name]
    if target is not None and has_name(target, name):
        if name in IGNORED:
            return "ignored", IGNORED[name]
        return "supported", f"{target}.{name}"
    if target is None:
        return "missing", f"no barrierflow module for {module}"
    return "missing", f"ImportError: cannot import name '{name}' from '{target}'"
