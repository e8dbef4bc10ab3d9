"""Nexmark: barrierflow next to Apache Flink (SQL and Python DataStream) and Spark Structured
Streaming, on one events file, one run after the other.

    python benchmarks/nexmark.py [--events 2000000] [--queries q0,q1,...] [--parallelism 2]
        [--repeat 3] [--peers flink-sql,flink-ds,spark-ss[,flink-sql-ckpt]] [--install-peers]
        [--state-backend hashmap|rocksdb] [--changelog]

The events file (`--input`, default `<workdir>/events-<N>.json`) is made with
`barrierflow nexmark generate` when it is missing. For every query, every system runs it
over that file as a separate process, one at a time; `--repeat R` rounds, and the median of
each system's runs is reported:

- barrierflow: `barrierflow nexmark run --input FILE --json`, without checkpoints and with
  exactly-once checkpoints every `--checkpoint-interval` ms (1 s), keyed state in the
  `--state-backend` (hashmap, the default, or rocksdb; `--changelog`: the checkpointed run
  with the hashmap backend's changelog checkpoints, the run without as it is);
- flink-sql: `benchmarks/peers/flink_nexmark.py`, Flink SQL in the JVM (PyFlink 2.3.0);
- flink-sql-ckpt (named in `--peers` only): the same with exactly-once checkpoints every
  `--checkpoint-interval` ms, full snapshots of its in-memory (hashmap) state: what the
  reference system keeps of its throughput with checkpoints (`Flink ckpt/none`), beside
  barrierflow's (`ckpt bf/Flink`);
- flink-ds: `benchmarks/peers/flink_datastream.py`, PyFlink's Python DataStream API in
  thread mode (q0, q1, q2, and `count`, bids per auction, a keyed running count);
- spark-ss: `benchmarks/peers/spark_nexmark.py`, Spark Structured Streaming, availableNow.

Each figure is events/s: the file's events (all kinds) over the run's time. barrierflow
and Flink count from all tasks running to the job's end; Spark from `start()` returning
to the query's end (its per-batch planning and checkpoints included). `*_wall` figures
count the whole process (JVM, Spark or Flink start-up included). The scripts' docstrings
say exactly what each includes.

Peers live in `$PEERS_ROOT` (default `~/peers`): `flink/venv` with apache-flink 2.3.0
(`--install-peers` creates it). Spark SS runs with this Python's pyspark. A peer that
cannot run is reported in one line, and the others and barrierflow still run. The table is
printed (Markdown), the figures written as JSON (`--json-out`) and drawn as a bar chart
(`--plot`, matplotlib), into the work folder unless named (a run of a few queries must not
replace the figures the docs show). `--check-peers` only reports which peers can run.

Latency (`--latency-rate R`, off by default), for q0 and q5 (`--latency-queries`): barrierflow
paced at R events/s (`barrierflow nexmark run --events R*S --rate R`: from an event's
creation by the generator to its result leaving the last operator) and Spark SS fed R
events/s as files (`spark_nexmark.py --latency`: from the time written into the event to
the end of the micro-batch that outputs its result; for q5 from the window's end), for
`--latency-seconds S` each. Flink has no paced run here.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow.nexmark.runner import count_events

REPO = Path(__file__).resolve().parent.parent
PEER_SCRIPTS = REPO / "benchmarks" / "peers"

BARRIERFLOW = "barrierflow"
BARRIERFLOW_CKPT = "barrierflow-ckpt"
FLINK_SQL_CKPT = "flink-sql-ckpt"
DEFAULT_PEERS = ("flink-sql", "flink-ds", "spark-ss")
PEERS = (*DEFAULT_PEERS, FLINK_SQL_CKPT)
SYSTEMS = (BARRIERFLOW, BARRIERFLOW_CKPT, *PEERS)
CHECKPOINTED = {BARRIERFLOW_CKPT: BARRIERFLOW, FLINK_SQL_CKPT: "flink-sql"}
"""Each system run with checkpoints, and the same system without."""
LABELS = {
    BARRIERFLOW: "barrierflow",
    BARRIERFLOW_CKPT: "barrierflow, ckpt",
    "flink-sql": "Flink SQL",
    FLINK_SQL_CKPT: "Flink SQL, ckpt",
    "flink-ds": "PyFlink DataStream",
    "spark-ss": "Spark SS",
}

BARRIERFLOW_QUERIES = (
    "q0", "q1", "q2", "q3", "q4", "q5", "q7", "q8", "q9", "q11", "q12",
    "q14", "q15", "q16", "q17", "q18", "q19", "q20", "q21", "q22",
)  # fmt: skip
"""barrierflow's queries (`barrierflow.nexmark.queries.QUERY_NAMES`)."""
FLINK_DS_QUERIES = ("q0", "q1", "q2", "count")
"""`flink_datastream.py`'s queries; `count` (bids per auction, a keyed running count) is
also barrierflow's (`barrierflow nexmark run --query count`), not Flink SQL's or Spark's."""
SPARK_QUERIES = (
    "q0", "q1", "q2", "q3", "q5", "q7", "q8", "q11", "q12",
    "q14", "q17", "q18", "q20", "q21", "q22",
)  # fmt: skip
"""`spark_nexmark.py`'s queries (the others cannot be written in Structured Streaming)."""
SUPPORTED: dict[str, tuple[str, ...]] = {
    BARRIERFLOW: (*BARRIERFLOW_QUERIES, "count"),
    BARRIERFLOW_CKPT: (*BARRIERFLOW_QUERIES, "count"),
    "flink-sql": BARRIERFLOW_QUERIES,
    FLINK_SQL_CKPT: BARRIERFLOW_QUERIES,
    "flink-ds": FLINK_DS_QUERIES,
    "spark-ss": SPARK_QUERIES,
}
ALL_QUERIES = (*BARRIERFLOW_QUERIES, "count")


def supports(system: str, query: str) -> bool:
    """Whether `system` has a version of `query`.

    >>> supports("spark-ss", "q15"), supports("flink-ds", "count"), supports("barrierflow", "count")
    (False, True, True)
    """
    return query in SUPPORTED[system]


# -- one run --------------------------------------------------------------------------------


@dataclass
class Run:
    """One process's outcome: its figures, or why there are none."""

    system: str
    query: str
    figures: dict[str, Any] | None = None
    error: str | None = None


def parse_output(system: str, stdout: str) -> dict[str, Any] | None:
    """The figures a run printed: barrierflow's JSON object, a peer's `RESULT {json}` line.

    >>> parse_output("flink-sql", 'log\\nRESULT {"events_per_second": 5}\\n')
    {'events_per_second': 5}
    >>> parse_output("barrierflow", '{"events_per_second": 7, "seconds": 1.0}')["seconds"]
    1.0
    >>> parse_output("spark-ss", "nothing") is None
    True
    """
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if system.startswith(BARRIERFLOW) and line.startswith("{"):
            return json.loads(line)
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT ") :])
    return None


def last_line(text: str, limit: int = 300) -> str:
    """The last non-empty line of a process's error output, cut to `limit` characters.

    >>> last_line("a\\nValueError: bad\\n\\n")
    'ValueError: bad'
    """
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "no output")[:limit]


# -- figures --------------------------------------------------------------------------------


@dataclass
class Cell:
    """A system's figures for one query: the median of its runs, or why it has none."""

    events_per_second: float | None = None
    events_per_second_wall: float | None = None
    runs: list[float] = field(default_factory=list)
    note: str | None = None


def summarize(runs: Iterable[Run]) -> dict[str, dict[str, Cell]]:
    """`{query: {system: Cell}}` with the medians of each system's successful runs.

    >>> runs = [Run("flink-sql", "q0", {"events_per_second": r, "events_per_second_wall": 1})
    ...         for r in (3, 1, 2)] + [Run("spark-ss", "q0", error="boom")]
    >>> cells = summarize(runs)["q0"]
    >>> cells["flink-sql"].events_per_second, cells["flink-sql"].runs, cells["spark-ss"].note
    (2, [3, 1, 2], 'boom')
    """
    grouped: dict[str, dict[str, list[Run]]] = {}
    for run in runs:
        grouped.setdefault(run.query, {}).setdefault(run.system, []).append(run)
    table: dict[str, dict[str, Cell]] = {}
    for query, systems in grouped.items():
        for system, attempts in systems.items():
            good = [r.figures for r in attempts if r.figures]
            good = [f for f in good if f.get("events_per_second")]
            if good:
                walls = [
                    f["events_per_second_wall"] for f in good if f.get("events_per_second_wall")
                ]
                cell = Cell(
                    statistics.median(f["events_per_second"] for f in good),
                    statistics.median(walls) if walls else None,
                    [f["events_per_second"] for f in good],
                )
            else:
                cell = Cell(note=next((r.error for r in attempts if r.error), "no figures"))
            table.setdefault(query, {})[system] = cell
    return table


def wall_figure(figures: Mapping[str, Any]) -> float | None:
    """Events/s over the whole command (start-up included), from a run's figures.

    >>> wall_figure({"events": 100, "wall_seconds": 4.0})
    25.0
    >>> wall_figure({"events_per_second_wall": 9}), wall_figure({})
    (9, None)
    """
    if figures.get("events_per_second_wall"):
        return figures["events_per_second_wall"]
    if figures.get("events") and figures.get("wall_seconds"):
        return figures["events"] / figures["wall_seconds"]
    return None


def ratio(ours: float | None, theirs: float | None) -> float | None:
    """`ours / theirs`, None when either is missing.

    >>> ratio(300, 100), ratio(None, 100), ratio(5, 0)
    (3.0, None, None)
    """
    if not ours or not theirs:
        return None
    return ours / theirs


def _rate(value: float | None) -> str:
    return f"{value:,.0f}" if value else "-"


def _times(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def table(
    cells: Mapping[str, Mapping[str, Cell]],
    queries: Sequence[str],
    systems: Sequence[str],
    wall: bool = False,
) -> str:
    """A Markdown table of events/s per query and system, with barrierflow's ratios: to
    itself with checkpoints (`ckpt/none`) and to each peer (`bf/<peer>`); for Flink SQL
    with checkpoints, its own ratio to its run without (`Flink ckpt/none`) and barrierflow's
    checkpointed run to it (`ckpt bf/Flink`).

    >>> cells = {"q0": {"barrierflow": Cell(200_000), "barrierflow-ckpt": Cell(150_000),
    ...                 "flink-sql": Cell(100_000)}}
    >>> print(table(cells, ["q0"], ["barrierflow", "barrierflow-ckpt", "flink-sql"]))
    | query | barrierflow | barrierflow, ckpt | ckpt/none | Flink SQL | bf/Flink SQL |
    |---|---:|---:|---:|---:|---:|
    | q0 | 200,000 | 150,000 | 0.75x | 100,000 | 2.00x |
    >>> cells["q0"]["flink-sql-ckpt"] = Cell(60_000)
    >>> print(table(cells, ["q0"], ["flink-sql-ckpt"]))
    | query | Flink SQL, ckpt | Flink ckpt/none | ckpt bf/Flink |
    |---|---:|---:|---:|
    | q0 | 60,000 | 0.60x | 2.50x |
    """

    def value(query: str, system: str) -> float | None:
        cell = cells.get(query, {}).get(system)
        if cell is None:
            return None
        return cell.events_per_second_wall if wall else cell.events_per_second

    header = ["query"]
    for system in systems:
        header.append(LABELS[system])
        if system == BARRIERFLOW_CKPT:
            header.append("ckpt/none")
        elif system == FLINK_SQL_CKPT:
            header += ["Flink ckpt/none", "ckpt bf/Flink"]
        elif system in PEERS:
            header.append(f"bf/{LABELS[system]}")
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    for query in queries:
        ours = value(query, BARRIERFLOW)
        row = [query]
        for system in systems:
            theirs = value(query, system)
            row.append(_rate(theirs))
            if system == BARRIERFLOW_CKPT:
                row.append(_times(ratio(theirs, ours)))
            elif system == FLINK_SQL_CKPT:
                row.append(_times(ratio(theirs, value(query, CHECKPOINTED[system]))))
                row.append(_times(ratio(value(query, compared_run(system)), theirs)))
            elif system in PEERS:
                row.append(_times(ratio(ours, theirs)))
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def notes(cells: Mapping[str, Mapping[str, Cell]]) -> list[str]:
    """One line per (query, system) that has no figure and says why.

    >>> notes({"q4": {"spark-ss": Cell(note="not expressible"), "flink-sql": Cell(1)}})
    ['q4 Spark SS: not expressible']
    """
    return [
        f"{query} {LABELS[system]}: {cell.note}"
        for query, systems in cells.items()
        for system, cell in systems.items()
        if cell.note
    ]


def compared_run(peer: str) -> str:
    """barrierflow's run a peer is compared with: the checkpointed one for a peer run with
    checkpoints.

    >>> compared_run("flink-sql"), compared_run("flink-sql-ckpt")
    ('barrierflow', 'barrierflow-ckpt')
    """
    return BARRIERFLOW_CKPT if peer in CHECKPOINTED else BARRIERFLOW


def geometric_mean_ratio(
    cells: Mapping[str, Mapping[str, Cell]], peer: str, queries: Sequence[str]
) -> float | None:
    """The geometric mean of barrierflow/peer over the queries where both have a figure
    (barrierflow's checkpointed run against a peer's with checkpoints).

    >>> cells = {"a": {"barrierflow": Cell(4), "x": Cell(1)},
    ...          "b": {"barrierflow": Cell(1), "x": Cell(1)}}
    >>> geometric_mean_ratio(cells, "x", ["a", "b", "c"])
    2.0
    """
    ours = compared_run(peer)
    ratios = [
        ratio(cells[q][ours].events_per_second, cells[q][peer].events_per_second)
        for q in queries
        if q in cells and ours in cells[q] and peer in cells[q]
    ]
    ratios = [r for r in ratios if r]
    return statistics.geometric_mean(ratios) if ratios else None


def plot(
    cells: Mapping[str, Mapping[str, Cell]],
    queries: Sequence[str],
    systems: Sequence[str],
    path: str | os.PathLike[str],
    title: str,
) -> bool:
    """A grouped bar chart of events/s (log scale when the figures span more than 20x) as a
    PNG at `path`; False (and nothing written) when there is no figure to draw."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    shown = [q for q in queries if any(cells.get(q, {}).get(s) for s in systems)]
    values = [
        c.events_per_second
        for q in shown
        for s in systems
        if (c := cells.get(q, {}).get(s)) and c.events_per_second
    ]
    if not values:
        return False
    width = 0.8 / len(systems)
    figure, axes = plt.subplots(figsize=(max(8.0, 0.9 * len(shown) + 2), 4.8))
    for index, system in enumerate(systems):
        heights = [
            (c.events_per_second or 0) if (c := cells.get(q, {}).get(system)) else 0 for q in shown
        ]
        positions = [i + (index - (len(systems) - 1) / 2) * width for i in range(len(shown))]
        axes.bar(positions, heights, width, label=LABELS[system])
    axes.set_xticks(range(len(shown)), shown)
    axes.set_ylabel("events/s (more is better)")
    if max(values) / min(values) > 20:
        axes.set_yscale("log")
    axes.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes.set_title(title)
    axes.legend(fontsize="small")
    axes.grid(axis="y", alpha=0.3)
    figure.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return True


# -- peers ----------------------------------------------------------------------------------


def peers_root() -> Path:
    return Path(os.environ.get("PEERS_ROOT") or Path.home() / "peers")


def flink_python(root: Path) -> Path:
    return root / "flink" / "venv" / "bin" / "python"


def peer_problems(root: Path, peers: Iterable[str]) -> dict[str, str]:
    """Why each peer that cannot run cannot, in one line (peers not named can run)."""
    problems: dict[str, str] = {}
    java = shutil.which("java") or (
        os.environ.get("JAVA_HOME") and Path(os.environ["JAVA_HOME"], "bin", "java")
    )
    for peer in peers:
        if peer not in PEERS:
            problems[peer] = f"unknown peer (known: {', '.join(PEERS)})"
        elif not java:
            problems[peer] = "no Java found (java on PATH or JAVA_HOME)"
        elif peer.startswith("flink"):
            python = flink_python(root)
            if not python.exists():
                problems[peer] = (
                    f"no PyFlink venv at {python.parent.parent} (--install-peers creates it)"
                )
            elif not _imports(str(python), "pyflink"):
                problems[peer] = f"{python} cannot import pyflink (--install-peers installs it)"
        elif not _imports(sys.executable, "pyspark"):
            problems[peer] = f"{sys.executable} cannot import pyspark"
    return problems


def _imports(python: str, module: str) -> bool:
    try:
        done = subprocess.run(
            [python, "-c", f"import {module}"], capture_output=True, timeout=120, env=_clean_env()
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _clean_env() -> dict[str, str]:
    """This environment without our venv's traces, for another venv's Python."""
    env = dict(os.environ)
    for name in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME"):
        env.pop(name, None)
    return env


def install_flink(root: Path) -> None:
    """Create `<root>/flink/venv` and pip-install apache-flink 2.3.0 into it (about 450 MB)."""
    venv = root / "flink" / "venv"
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "apache-flink==2.3.0"],
        check=True,
        env=_clean_env(),
    )


# -- running --------------------------------------------------------------------------------


def command(
    system: str,
    query: str,
    path: str,
    events: int,
    parallelism: int,
    interval: int,
    root: Path,
    state_backend: str = "hashmap",
    changelog: bool = False,
) -> list[str]:
    """The command line that runs `query` on `system` (`changelog`: the checkpointed run's)."""
    if system.startswith(BARRIERFLOW):
        line = [str(Path(sys.executable).with_name("barrierflow")), "nexmark", "run"]
        line += ["--query", query, "--input", path, "--parallelism", str(parallelism), "--json"]
        line += ["--state-backend", state_backend]
        if system == BARRIERFLOW_CKPT:
            line += ["--checkpoint-interval", str(interval)]
            line += ["--changelog"] if changelog else []
        return line
    common = ["--query", query, "--input", path, "--par", str(parallelism)]
    common += ["--events", str(events)]
    if system == "flink-sql":
        return [str(flink_python(root)), str(PEER_SCRIPTS / "flink_nexmark.py"), *common]
    if system == FLINK_SQL_CKPT:
        script = str(PEER_SCRIPTS / "flink_nexmark.py")
        return [str(flink_python(root)), script, *common, "--ckpt", str(interval)]
    if system == "flink-ds":
        return [str(flink_python(root)), str(PEER_SCRIPTS / "flink_datastream.py"), *common]
    return [sys.executable, str(PEER_SCRIPTS / "spark_nexmark.py"), *common]


def run_one(line: list[str], system: str, query: str, timeout: float) -> Run:
    env = _clean_env() if system.startswith("flink") else dict(os.environ)
    try:
        done = subprocess.run(line, capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return Run(system, query, error=f"timed out after {timeout:.0f} s")
    figures = parse_output(system, done.stdout)
    if done.returncode != 0 or figures is None:
        return Run(system, query, error=f"exit {done.returncode}: {last_line(done.stderr)}")
    if not figures.get("events_per_second_wall"):
        figures["events_per_second_wall"] = wall_figure(figures)
    return Run(system, query, figures)


def latency_command(
    system: str, query: str, rate: int, seconds: int, parallelism: int, path: str
) -> list[str]:
    """The command line of a paced run of `query` at `rate` events/s for `seconds`."""
    if system == BARRIERFLOW:
        line = [str(Path(sys.executable).with_name("barrierflow")), "nexmark", "run"]
        line += ["--query", query, "--events", str(rate * seconds), "--rate", str(rate)]
        return [*line, "--parallelism", str(parallelism), "--json"]
    line = [sys.executable, str(PEER_SCRIPTS / "spark_nexmark.py"), "--latency"]
    line += ["--query", query, "--input", path, "--rate", str(rate), "--seconds", str(seconds)]
    return [*line, "--warmup", str(min(15, seconds // 4)), "--par", str(parallelism)]


def latency_table(runs: Iterable[Run]) -> str:
    """A Markdown table of each latency run's p50 / p95 / p99 / max in milliseconds.

    >>> print(latency_table([Run("spark-ss", "q5", {"latency_ms": {"p50": 6700.0,
    ...     "p95": 12400.0, "p99": 14000.0, "max": 14500.0}}), Run("barrierflow", "q5",
    ...     error="timed out")]))
    | query | system | p50 ms | p95 ms | p99 ms | max ms |
    |---|---|---:|---:|---:|---:|
    | q5 | Spark SS | 6,700 | 12,400 | 14,000 | 14,500 |
    | q5 | barrierflow | timed out | - | - | - |
    """
    lines = [
        "| query | system | p50 ms | p95 ms | p99 ms | max ms |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for run in runs:
        latency = (run.figures or {}).get("latency_ms")
        if latency:
            cells = [f"{latency[k]:,.0f}" for k in ("p50", "p95", "p99", "max")]
        else:
            cells = [run.error or "no latency figures", "-", "-", "-"]
        lines.append(f"| {run.query} | {LABELS[run.system]} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def ensure_events(path: Path, events: int, seed: int) -> None:
    """Generate the events file with `barrierflow nexmark generate` unless it exists."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    barrierflow = str(Path(sys.executable).with_name("barrierflow"))
    line = [barrierflow, "nexmark", "generate", "--events", str(events), "--out", str(path)]
    subprocess.run([*line, "--seed", str(seed)], check=True)


def machine() -> dict[str, Any]:
    """What the figures were measured on."""
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "load_average_1m_at_start": os.getloadavg()[0],
    }
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            models = [line.split(":", 1)[1].strip() for line in cpuinfo if "model name" in line]
        info["cpu"] = models[0] if models else None
        with open("/proc/meminfo") as meminfo:
            info["memory_gib"] = round(int(meminfo.readline().split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False)
        info["java"] = java.stderr.splitlines()[0] if java.stderr else None
    except OSError:
        info["java"] = None
    return info


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2_000_000, help="events in the file")
    parser.add_argument("--input", help="events file (default: <workdir>/events-<N>.json)")
    parser.add_argument("--workdir", default=os.path.join(os.sep, "tmp", "barrierflow-nexmark"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--queries", default=",".join(ALL_QUERIES))
    parser.add_argument("--parallelism", type=int, default=2)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--peers",
        default=",".join(DEFAULT_PEERS),
        help=f"'' for barrierflow alone; {FLINK_SQL_CKPT}: Flink SQL with checkpoints",
    )
    parser.add_argument("--checkpoint-interval", type=int, default=1000, help="ms")
    parser.add_argument(
        "--state-backend", choices=("hashmap", "rocksdb"), default="hashmap", help="barrierflow's"
    )
    parser.add_argument(
        "--changelog",
        action="store_true",
        help="the checkpointed run with hashmap changelog checkpoints",
    )
    parser.add_argument("--no-checkpoint-run", action="store_true", help="skip barrierflow-ckpt")
    parser.add_argument(
        "--peers-only", action="store_true", help="run the peers alone (no barrierflow runs)"
    )
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--install-peers", action="store_true")
    parser.add_argument("--check-peers", action="store_true", help="only say which peers run")
    parser.add_argument("--latency-rate", type=int, default=0, help="events/s (0: no latency)")
    parser.add_argument("--latency-seconds", type=int, default=60)
    parser.add_argument("--latency-queries", default="q0,q5")
    parser.add_argument(
        "--json-out",
        help="figures as JSON (default: <workdir>/nexmark.json; the docs' own are "
        "docs/images/nexmark.json, written only when named)",
    )
    parser.add_argument("--plot", help="bar chart (default: <workdir>/nexmark.png)")
    args = parser.parse_args(argv)
    args.json_out = args.json_out or os.path.join(args.workdir, "nexmark.json")
    args.plot = args.plot or os.path.join(args.workdir, "nexmark.png")

    queries = [q.strip() for q in args.queries.split(",") if q.strip()]
    unknown = [q for q in queries if q not in ALL_QUERIES]
    if unknown:
        parser.error(f"unknown queries {unknown}; known: {', '.join(ALL_QUERIES)}")
    peers = [p.strip() for p in args.peers.split(",") if p.strip()]
    root = peers_root()
    if args.install_peers and any(p.startswith("flink") for p in peers):
        try:
            install_flink(root)
        except (OSError, subprocess.CalledProcessError) as error:
            print(f"could not install PyFlink into {root / 'flink' / 'venv'}: {error}")
    problems = peer_problems(root, peers)
    for peer, problem in problems.items():
        print(f"{peer}: not run: {problem}")
    if args.check_peers:
        for peer in peers:
            if peer not in problems:
                print(f"{peer}: ready")
        return 0
    peers = [p for p in peers if p not in problems]
    systems = [BARRIERFLOW] + ([] if args.no_checkpoint_run else [BARRIERFLOW_CKPT])
    systems = (systems if not args.peers_only else []) + peers

    path = Path(args.input or os.path.join(args.workdir, f"events-{args.events}.json"))
    ensure_events(path, args.events, args.seed)
    events = count_events(str(path))
    print(f"events file {path} ({events:,} events); queries {', '.join(queries)}")
    runs: list[Run] = []
    for round_number in range(1, args.repeat + 1):
        for query in queries:
            for system in systems:
                if not supports(system, query):
                    continue
                line = command(
                    system, query, str(path), events, args.parallelism,
                    args.checkpoint_interval, root, args.state_backend, args.changelog,
                )  # fmt: skip
                started = time.monotonic()
                run = run_one(line, system, query, args.timeout)
                runs.append(run)
                took = time.monotonic() - started
                shown = (
                    f"{run.figures['events_per_second']:,.0f} events/s"
                    if run.figures
                    else f"failed: {run.error}"
                )
                pause = ((run.figures or {}).get("checkpoints") or {}).get("sync_ms")
                if pause and system == BARRIERFLOW_CKPT:  # the periodic checkpoints' pause
                    shown += f", barrier pause p50 {pause['p50']:.1f} / max {pause['max']:.1f} ms"
                print(f"[{round_number}/{args.repeat}] {query} {system}: {shown} ({took:.0f} s)")
                sys.stdout.flush()

    latency_runs: list[Run] = []
    if args.latency_rate:
        for query in [q.strip() for q in args.latency_queries.split(",") if q.strip()]:
            for system in [BARRIERFLOW] + (["spark-ss"] if "spark-ss" in peers else []):
                line = latency_command(
                    system, query, args.latency_rate, args.latency_seconds, args.parallelism,
                    str(path),
                )  # fmt: skip
                run = run_one(line, system, query, args.timeout)
                latency_runs.append(run)
                shown = (run.figures or {}).get("latency_ms") or run.error
                print(f"latency {query} {system}: {shown}")
                sys.stdout.flush()

    cells = summarize(runs)
    print()
    print(table(cells, queries, systems))
    print("\nincluding start-up (whole process):\n")
    print(table(cells, queries, systems, wall=True))
    print()
    for peer in peers:
        mean = geometric_mean_ratio(cells, peer, queries)
        if mean:
            print(f"geometric mean {LABELS[compared_run(peer)]}/{LABELS[peer]}: {mean:.2f}x")
    for peer in peers:
        missing = [q for q in queries if not supports(peer, q)]
        if missing:
            print(f"{LABELS[peer]} has no version of {', '.join(missing)}")
    for line in notes(cells):
        print(line)
    if latency_runs:
        print(f"\nlatency at {args.latency_rate:,} events/s:\n")
        print(latency_table(latency_runs))
    title = f"Nexmark, {events:,} events, parallelism {args.parallelism}"
    if args.plot and plot(cells, queries, systems, args.plot, title):
        print(f"chart: {args.plot}")
    if args.json_out:
        Path(args.json_out).parent.mkdir(parents=True, exist_ok=True)
        report = {
            "events": events,
            "events_file": str(path),
            "parallelism": args.parallelism,
            "checkpoint_interval_ms": args.checkpoint_interval,
            "state_backend": args.state_backend,
            "changelog": args.changelog,
            "repeat": args.repeat,
            "machine": machine(),
            "peers_not_run": problems,
            "runs": [vars(run) for run in runs],
            "latency_rate": args.latency_rate or None,
            "latency_runs": [vars(run) for run in latency_runs],
            "medians": {q: {s: vars(c) for s, c in row.items()} for q, row in cells.items()},
        }
        Path(args.json_out).write_text(json.dumps(report, indent=1) + "\n")
        print(f"figures: {args.json_out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
