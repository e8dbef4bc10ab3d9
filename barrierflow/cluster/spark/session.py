"""The SparkContext a job runs on: obtaining it, and the task slots and executors it offers.

The embedded default is `local[N]` on loopback; any other master is used as the user (or
`spark-submit`) configured it. On a cluster master executors register only after the
application started, so the slot check waits for them, bounded by
`spark.barrierflow.slots.waitTimeout`, before it says what is missing.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
import threading
import zipfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.cluster.log_dir import create_private_file
from barrierflow.cluster.spark.java import ensure_java_home
from barrierflow.errors import ConfigurationError, InsufficientResourcesError

log = logging.getLogger(__name__)

EMBEDDED_CONFIG = {
    "spark.ui.showConsoleProgress": "false",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    # A killed Python worker keeps running until this timeout: keep zombies short.
    "spark.python.task.killTimeout": "1s",
    "spark.sql.shuffle.partitions": "4",
}

PRELOADING_DAEMON = {"spark.python.daemon.module": "barrierflow.cluster.executor.spark_daemon"}
"""On local[N], whose Python workers run this interpreter, they fork from a daemon that has
imported barrierflow already (executor/spark_daemon.py) instead of each importing it."""

SLOTS_WAIT_TIMEOUT_KEY = "spark.barrierflow.slots.waitTimeout"
SLOTS_WAIT_TIMEOUT_DEFAULT = "60s"
SHIP_PACKAGE_KEY = "spark.barrierflow.shipPackage"
PYTHON_KEY = "spark.pyspark.python"
"""The Python of Spark's workers (before PYSPARK_PYTHON)."""
SLOTS_POLL_S = 0.25
"""How often the slot wait looks at the registered executors."""
SLOTS_REPORT_S = 10.0
"""How often the slot wait logs its progress."""


@dataclass(frozen=True)
class SparkOptions:
    """Spark settings for the SparkContext a job starts (`barrierflow run --conf ...`), and the
    Python files its executors need (`--py-files`, `env.add_python_file`)."""

    conf: Mapping[str, str] = field(default_factory=dict)
    """Spark conf keys, given to the new SparkContext (`--conf`, `--executor-memory`, ...)."""
    py_files: tuple[str, ...] = ()
    """.py, .zip or .egg files (or folders, zipped first) added with `addPyFile`."""

    def merged(self, other: SparkOptions) -> SparkOptions:
        """These options with `other`'s on top (its conf keys win, its files are added)."""
        files = self.py_files + tuple(f for f in other.py_files if f not in self.py_files)
        return SparkOptions({**self.conf, **other.conf}, files)


def is_local_master(master: str) -> bool:
    """A master whose tasks run in the driver's own JVM (`local`, `local[N]`); every other
    master, `local-cluster[...]` included, starts executors of its own."""
    return master.startswith("local") and not master.startswith("local-cluster")


def embedded_master(slots_needed: int) -> str:
    """Spark `local[*]`, widened to the job's subtask count: a barrier stage needs one slot
    per task, and local[N] gives N slots whatever the cores."""
    return f"local[{max(os.cpu_count() or 1, slots_needed)}]"


NO_SPARK_RETRIES = {"spark.task.maxFailures": "1"}
"""The JobMaster restarts a failed attempt itself, from its latest checkpoint and under the
job's restart strategy. A retry of the barrier stage by Spark (4 tries by default on a
cluster) would only rerun the failed attempt's tasks, which the JobMaster fences off, and
delay the failure it has to see; local masters already try once."""


def obtain_spark_context(
    master: str | None, slots_needed: int, options: SparkOptions | None = None
) -> Any:
    """The active SparkContext, or a new one on `master`: if None, the master `spark-submit`
    (or an existing SparkContext) set, else the embedded default. `options` become the new
    context's settings; its Python files are added to whichever context is returned.

    A job needs only the context (barrier stages, the status tracker). A SparkSession on top
    starts Spark SQL in the JVM too, about 4 s more per driver (a local[2] context in 6.3 s
    against a session in 10.9 s here), so none is made unless asked for (`obtain_spark`)."""
    options = options or SparkOptions()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import SparkConf, SparkContext

    active = SparkContext._active_spark_context
    if active is not None and master is None:
        _add_py_files(active, options.py_files)
        return active
    # Only a JVM to start needs Java found (`java -version`: a second or more per job, busy).
    if active is None:
        ensure_java_home()
    conf = SparkConf().setAppName("barrierflow")
    submitted = _submitted_conf() if master is None else {}
    chosen = master or submitted.get("spark.master")
    if chosen is None:
        chosen = embedded_master(slots_needed)
    if "spark.master" not in submitted:
        conf.setMaster(chosen)
    if is_local_master(chosen) or chosen.startswith("local-cluster"):
        # Everything stays on loopback (and Spark stops warning about the host name).
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        for key, value in EMBEDDED_CONFIG.items():
            if key not in submitted:
                conf.set(key, value)
    python = {**submitted, **options.conf}.get(PYTHON_KEY, os.environ["PYSPARK_PYTHON"])
    preload = PRELOADING_DAEMON if is_local_master(chosen) and _is_this_python(python) else {}
    for key, value in {**NO_SPARK_RETRIES, **preload}.items():
        if key not in submitted and key not in options.conf:
            conf.set(key, value)
    for key, value in options.conf.items():
        conf.set(key, value)
    if "PYSPARK_GATEWAY_PORT" not in os.environ and active is None:
        # barrierflow starts the JVM: Spark's own start-up lines stay off the console too
        java_options = options.conf.get(DRIVER_JAVA_OPTIONS_KEY, "")
        if "log4j2.configurationFile" not in java_options:
            startup = f"-Dlog4j2.configurationFile={startup_log_config().as_uri()}"
            conf.set(DRIVER_JAVA_OPTIONS_KEY, f"{java_options} {startup}".strip())
    sc = SparkContext.getOrCreate(conf)
    level = os.environ.get(SPARK_LOG_LEVEL_ENV)
    sc.setLogLevel(level or "ERROR")
    if level is None and is_local_master(sc.master):
        _quiet_task_failures(sc)
    if ship_package(sc):
        _add_py_files(sc, (str(package_zip()),))
    _add_py_files(sc, options.py_files)
    return sc


def conf_getter(sc: Any) -> Callable[..., Any]:
    """How a job reads Spark settings (`get(key, default)`): through the SparkSession on `sc`
    if the user (or a test) made one, so keys set with `spark.conf.set` after it started
    count too, else from the context's SparkConf (a job makes no session)."""
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    try:
        session = SparkSession.active()  # this thread's, else the builder's
    except PySparkException:  # none was made
        return sc.getConf().get
    return session.conf.get if session.sparkContext is sc else sc.getConf().get


def obtain_spark(master: str | None, slots_needed: int, options: SparkOptions | None = None) -> Any:
    """A SparkSession on `obtain_spark_context`'s context, for code that reads or writes
    DataFrames (the state processor's readers, tests checking a job's files in Spark)."""
    from pyspark.sql import SparkSession

    obtain_spark_context(master, slots_needed, options)
    return SparkSession.builder.getOrCreate()


def _is_this_python(python: str) -> bool:
    """Whether `python` (a path, or a name on PATH), which Spark's Python workers run, is the
    interpreter running this code: only then can they import this barrierflow."""
    named = shutil.which(python)
    if named is None:
        return False
    named, here = os.path.abspath(named), os.path.abspath(sys.executable)
    return os.path.dirname(named) == os.path.dirname(here) and os.path.samefile(named, here)


def _submitted_conf() -> dict[str, str]:
    """The settings of an application launched with `spark-submit` (whose JVM the Python
    driver joins), or of a SparkContext already running; empty otherwise (no JVM is
    started here: settings that shape the JVM must reach its launch)."""
    from pyspark import SparkConf, SparkContext

    context = SparkContext._active_spark_context
    if context is not None:
        return dict(context.getConf().getAll())
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return {}
    SparkContext._ensure_initialized()
    return dict(SparkConf().getAll())


def _quiet_task_failures(sc: Any) -> None:
    """In the embedded Spark, a failed task (a killed stream task, say) would print the
    executor's Java stack trace in the job's console; the JobMaster already reports the
    cause in one line, so the executor's logger keeps only fatal messages. Setting
    BARRIERFLOW_SPARK_LOG_LEVEL shows everything again."""
    jvm = sc._jvm
    try:
        jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
            "org.apache.spark.executor.Executor", jvm.org.apache.logging.log4j.Level.FATAL
        )
    except Exception as error:  # another logging backend: keep Spark's output as it is
        log.debug("cannot quiet Spark's executor log: %s", error)


# ---------------------------------------------------------------------------------------------
# Spark's own log

DRIVER_JAVA_OPTIONS_KEY = "spark.driver.extraJavaOptions"
SPARK_LOG_LEVEL_ENV = "BARRIERFLOW_SPARK_LOG_LEVEL"
"""The lowest level of Spark's lines in the job's spark.log (default WARN)."""
SPARK_LOG_FILE = "spark.log"
_STARTUP_CONFIG = """status = error
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
rootLogger.level = error
rootLogger.appenderRef.console.ref = console
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
"""


_startup_lock = threading.Lock()
_startup_config: list[Path] = []
"""This process's start-up configuration file, once made."""


def startup_log_config() -> Path:
    """A log4j2 configuration for the JVM barrierflow starts, until a job sends Spark's log to
    its own folder: errors only, on stderr (Spark's start-up notices stay off the console).

    One file per process, made with mkstemp (a name nobody can guess, mode 0600, created by
    this process alone: issue 21, a fixed name in /tmp let another user's file be read by our
    JVM), kept while the process lives and removed at its exit."""
    with _startup_lock:
        if _startup_config and _startup_config[0].is_file():
            return _startup_config[0]
        fd, name = tempfile.mkstemp(prefix="barrierflow-log4j2-", suffix=".properties")
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(_STARTUP_CONFIG)
        path = Path(name)
        _startup_config[:] = [path]
        atexit.register(_remove_quietly, path)
        return path


def _remove_quietly(path: Path) -> None:
    with contextlib.suppress(OSError):
        path.unlink()


def spark_log_config(log_file: Path, level: str) -> str:
    """A log4j2 configuration that appends every Spark line at `level` or above to
    `log_file`, and nothing to the console.

    >>> print(spark_log_config(Path("/logs/job-1/spark.log"), "WARN").splitlines()[4])
    appender.file.fileName = /logs/job-1/spark.log
    """
    return f"""status = error
appender.file.type = File
appender.file.name = file
appender.file.append = true
appender.file.fileName = {log_file}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
rootLogger.level = {level}
rootLogger.appenderRef.file.ref = file
logger.jetty.name = org.sparkproject.jetty
logger.jetty.level = warn
"""


_redirected: list[Any] = []
"""The JVM stream of the last job's spark.log (its System.err), closed by the next job's
redirection: a driver holds one spark.log open, whatever the number of jobs it ran."""


def redirect_spark_log(sc: Any, folder: Path) -> None:
    """From now on the driver JVM's Spark log and its standard error go to
    `folder`/spark.log only (log4j2 reconfigured at run time through its Configurator: the
    JVM started before the job's folder was known). The previous job's spark.log is closed
    here, not at that job's end: what Spark prints after a job (a local-cluster shutting
    down, the session stopping) belongs in the last job's log, never on the console, and
    the driver holds at most one such file (issue 21: one left open per job). When the JVM's
    logging cannot be reconfigured (another backend) Spark's output stays as it was.
    Executors on a cluster keep their own logs (the cluster manager's)."""
    level = os.environ.get(SPARK_LOG_LEVEL_ENV) or "WARN"
    log_file = folder / SPARK_LOG_FILE
    config = folder / "log4j2.properties"
    try:
        for private in (config, log_file):  # 0600 before log4j2 or the JVM creates it
            create_private_file(private)
        config.write_text(spark_log_config(log_file, level), encoding="utf-8")
        jvm = sc._jvm
        # reconfiguring stops the previous configuration's file appender (closing its file)
        jvm.org.apache.logging.log4j.core.config.Configurator.reconfigure(
            jvm.java.net.URI(config.as_uri())
        )
        # What the JVM prints itself, outside log4j (an uncaught exception's stack trace,
        # e.g. a rejected task of a thread pool while a local-cluster shuts down), joins it.
        stream = jvm.java.io.PrintStream(jvm.java.io.FileOutputStream(str(log_file), True), True)
        jvm.java.lang.System.setErr(stream)
    except Exception as error:  # another logging backend, an unwritable folder
        log.warning("Spark's log stays where Spark writes it: %s", error)
        return
    previous, _redirected[:] = _redirected[:], [stream]
    for old in previous:
        with contextlib.suppress(Exception):  # a JVM of an earlier, stopped session
            old.close()


# ---------------------------------------------------------------------------------------------
# Code for the executors


def ship_package(sc: Any) -> bool:
    """Whether barrierflow itself goes to the executors as a zip (`spark.barrierflow.shipPackage`,
    default: on for cluster masters), so they run the driver's version of it."""
    default = "false" if is_local_master(sc.master) else "true"
    value = str(conf_getter(sc)(SHIP_PACKAGE_KEY, default)).strip().lower()
    if value not in ("true", "false"):
        raise ConfigurationError(f"{SHIP_PACKAGE_KEY} must be true or false, not {value!r}")
    return value == "true"


_zip_lock = threading.Lock()
_zips: dict[str, Path] = {}
"""The zip made of each folder in this process (a folder is zipped once)."""


def package_zip() -> Path:
    """A zip of the barrierflow package this driver runs (made once per process)."""
    return zip_folder(Path(__file__).resolve().parent.parent)


def zip_folder(folder: Path) -> Path:
    """`folder` as `<temp>/<name>.zip` holding `<name>/...` (Python files and package data,
    no caches), so `import <name>` works with the zip on the path."""
    folder = folder.resolve()
    with _zip_lock:
        if str(folder) in _zips:
            return _zips[str(folder)]
        holder = tempfile.mkdtemp(prefix="barrierflow-pyfiles-")
        atexit.register(shutil.rmtree, holder, True)  # Spark has its own copy by then
        target = Path(holder) / f"{folder.name}.zip"
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(folder.rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts and path.suffix != ".pyc":
                    archive.write(path, Path(folder.name) / path.relative_to(folder))
        _zips[str(folder)] = target
        return target


def python_file_for_spark(path: str) -> str:
    """What `addPyFile` takes for `path`: a .py, .zip or .egg as it is, a folder zipped."""
    local = Path(path)
    if local.is_dir():
        return str(zip_folder(local))
    if "://" not in path and not local.is_file():
        raise ConfigurationError(f"python file {path} does not exist")
    if local.suffix not in (".py", ".zip", ".egg") and "://" not in path:
        raise ConfigurationError(f"python file {path} is not a .py, .zip or .egg file or a folder")
    return path


def _add_py_files(sc: Any, paths: tuple[str, ...]) -> None:
    """Add each file once per SparkContext (Spark refuses a second file of the same name)."""
    added = getattr(sc, "_barrierflow_py_files", None)
    if added is None:
        added = set()
        sc._barrierflow_py_files = added
    for path in paths:
        shipped = python_file_for_spark(path)
        if shipped not in added:
            sc.addPyFile(shipped)
            added.add(shipped)


# ---------------------------------------------------------------------------------------------
# Task slots

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h)?\s*$", re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, None: 1.0}


def parse_duration_s(text: str, key: str = SLOTS_WAIT_TIMEOUT_KEY) -> float:
    """A duration as Spark writes them ("60s", "2min", "500ms", "1h"; a plain number is
    seconds), in seconds.

    >>> parse_duration_s("2min"), parse_duration_s("500ms"), parse_duration_s("45")
    (120.0, 0.5, 45.0)
    """
    match = _DURATION.match(str(text))
    if match is None:
        raise ConfigurationError(
            f"{key} must be a duration such as 60s, 2min, 500ms or a number of seconds, "
            f"not {text!r}"
        )
    unit = match.group(2).lower() if match.group(2) else None
    return float(match.group(1)) * _UNIT_S[unit]


def slots_wait_timeout_s(sc: Any) -> float:
    return parse_duration_s(conf_getter(sc)(SLOTS_WAIT_TIMEOUT_KEY, SLOTS_WAIT_TIMEOUT_DEFAULT))


def registered_slots(sc: Any) -> int:
    """How many tasks the registered executors can run at once (with the default profile)."""
    jsc = sc._jsc.sc()
    try:
        profile = jsc.resourceProfileManager().defaultResourceProfile()
        return int(jsc.maxNumConcurrentTasks(profile))
    except Exception:  # older or restricted gateways: fall back to the default parallelism
        return int(sc.defaultParallelism)


def check_slots(
    sc: Any,
    slots_needed: int,
    clock: Clock = SYSTEM_CLOCK,
    pause: Callable[[float], object] | None = None,
) -> None:
    """Return once the context offers a slot per subtask; raise InsufficientResourcesError
    naming the fix if it does not (at once on a local master, whose slots are fixed; after
    waiting up to `spark.barrierflow.slots.waitTimeout` for executors on a cluster)."""
    master = sc.master
    if is_local_master(master):
        slots = registered_slots(sc)
        if slots < slots_needed:
            raise InsufficientResourcesError(
                f"the job has {slots_needed} subtasks but Spark master {master} offers {slots} "
                f"task slots; a barrier stage needs one slot per subtask. Lower the "
                f"parallelism, or run on local[{slots_needed}]"
            )
        return
    conf = sc.getConf()
    wait_for_slots(
        slots_needed,
        lambda: registered_slots(sc),
        slots_wait_timeout_s(sc),
        clock,
        pause or threading.Event().wait,
        lambda have, waited_s: InsufficientResourcesError(
            shortage_message(master, slots_needed, have, waited_s, dict(conf.getAll()))
        ),
    )


def wait_for_slots(
    needed: int,
    count_slots: Callable[[], int],
    timeout_s: float,
    clock: Clock,
    pause: Callable[[float], object],
    shortage: Callable[[int, float], Exception],
    poll_s: float = SLOTS_POLL_S,
    report_s: float = SLOTS_REPORT_S,
) -> int:
    """Poll `count_slots` until it reaches `needed` (returns the count) or `timeout_s` passed
    (raises `shortage(slots, waited_s)`), logging the progress every `report_s`."""
    start = clock.monotonic()
    next_report = start + report_s
    while True:
        slots = count_slots()
        waited = clock.monotonic() - start
        if slots >= needed:
            if waited > 0:
                log.info("%d of %d task slots registered after %.0f s", slots, needed, waited)
            return slots
        if waited >= timeout_s:
            raise shortage(slots, waited)
        now = clock.monotonic()
        if now >= next_report or waited == 0:
            log.warning(
                "waiting for executors: %d of %d task slots registered (%.0f s of %.0f s)",
                slots,
                needed,
                waited,
                timeout_s,
            )
            if now >= next_report:
                next_report = now + report_s
        pause(min(poll_s, max(timeout_s - waited, 0.0)))


def shortage_message(
    master: str, needed: int, have: int, waited_s: float, conf: Mapping[str, str]
) -> str:
    """What a cluster lacks for the job, and the settings that give it more slots."""
    dynamic = str(conf.get("spark.dynamicAllocation.enabled", "false")).lower() == "true"
    cores = conf.get("spark.executor.cores", "(the cluster's default)")
    task_cpus = conf.get("spark.task.cpus", "1")
    instances = conf.get("spark.executor.instances", "(unset)")
    hints = [
        "a barrier stage needs one task slot per subtask, all at once",
        f"slots = executors x spark.executor.cores ({cores}) / spark.task.cpus ({task_cpus}); "
        f"spark.executor.instances is {instances}",
        "give it more: --num-executors / --conf spark.executor.instances=N, "
        "--executor-cores / --conf spark.executor.cores=N, a lower spark.task.cpus, "
        "or more workers (standalone: spark.cores.max)",
    ]
    if dynamic:
        hints.append(
            "dynamic allocation is on: set spark.dynamicAllocation.enabled=false, or "
            f"spark.dynamicAllocation.minExecutors high enough for {needed} slots"
        )
    else:
        hints.append(
            "with dynamic allocation, keep spark.dynamicAllocation.minExecutors high enough "
            "(or spark.dynamicAllocation.enabled=false)"
        )
    hints.append(
        f"or lower the job's parallelism; or wait longer for executors ({SLOTS_WAIT_TIMEOUT_KEY})"
    )
    return (
        f"the job has {needed} subtasks but Spark master {master} offers {have} task slots "
        f"after waiting {waited_s:.0f} s for executors. " + "; ".join(hints)
    )


def executor_hosts(sc: Any) -> frozenset[str]:
    """The hosts of the executors registered now (the driver's own entry excluded); on a local
    master, whose tasks run in the driver, the driver's host."""
    executors = sc._jsc.sc().statusStore().executorList(True)  # a Scala Seq, the driver's too
    hosts = set()
    for index in range(executors.size()):
        summary = executors.apply(index)
        if summary.id() != "driver":
            hosts.add(summary.hostPort().rsplit(":", 1)[0])
    if not hosts and is_local_master(sc.master):
        hosts.add(sc.getConf().get("spark.driver.host", "127.0.0.1"))
    return frozenset(hosts)
