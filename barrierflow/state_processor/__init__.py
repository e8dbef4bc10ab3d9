"""Read a savepoint's or checkpoint's state, and write new savepoints (Flink's State
Processor API, over the format of docs/savepoint-format.md).

Reading. `load(path)` opens a savepoint or `chk-N` folder (or its `_metadata`) in
pure Python: `operators()` lists uid, name, parallelism and keyed states with their
kinds; `keyed_entries`, `operator_state_entries`, `operator_list_entries`,
`broadcast_entries` and `timer_entries` yield the entries. With a SparkSession,
`keyed_state(spark, uid, state)`, `operator_state(spark, uid)`,
`operator_list_state(spark, uid)`, `broadcast_state(spark, uid, state)` and
`timers(spark, uid)` return DataFrames, and
`read(spark).option("uid", ...).option("state", ...).load(path)` does the same in
the shape of `spark.read`.

    keyed value state   key, namespace, value
    keyed list state    key, namespace, value (an array: the key's elements)
    keyed map state     key, namespace, user_key, value (a row per map entry)
    a window operator's key, namespace (the window), value
      map states
    operator state      subtask, state
    operator list state state_name, subtask, value (a row per element of the lists
      of a user function  a CheckpointedFunction keeps)
    broadcast state     key, value (a row per entry of the map a (Keyed)Broadcast-
                        ProcessFunction keeps under its MapStateDescriptor's name; every
                        subtask holds the same copy, read from the lowest subtask's)
    timers              domain ("event_time"/"processing_time"), timestamp, key, namespace

The namespace is null outside window operators. Each column takes the type Spark
infers from its values; a column Spark cannot type holds pickles (see `_frames`).

Writing. `SavepointWriter(max_parallelism)` builds a savepoint from DataFrames, dicts
or tuples (`with_keyed_state`, `with_operator_state`, `with_operator_list_state`,
`with_broadcast_state`: a copy for every subtask)
and operators copied from a snapshot (`with_operator_of`;
`SavepointWriter.from_snapshot(s)` copies all of them, to modify one state). Keys
are split into key groups by the runtime's stable hash, so a job of any parallelism
restores the result; operator list state is redistributed as its mode says.

>>> import tempfile
>>> from barrierflow import state_processor
>>> folder = tempfile.mkdtemp() + "/savepoint"
>>> _ = (
...     state_processor.SavepointWriter(max_parallelism=128)
...     .with_keyed_state("count", "total", [("ant", 3), ("bee", 5)])
...     .write(folder)
... )
>>> snapshot = state_processor.load(folder)
>>> [(op.uid, [s.kind for s in op.states]) for op in snapshot.operators()]
[('count', ['value'])]
>>> sorted((e.key, e.value) for e in snapshot.keyed_entries("count", "total"))
[('ant', 3), ('bee', 5)]

Caveats: values are pickled in the savepoint, so their classes must be importable
where they are read; a written savepoint holds only what was put in it (operators
left out start empty when a job restores it).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from barrierflow.state_processor._snapshot import (
    BroadcastEntry,
    BroadcastStateInfo,
    KeyedEntry,
    ListStateInfo,
    OperatorInfo,
    OperatorListEntry,
    Snapshot,
    StateInfo,
    TimerEntry,
    load,
)
from barrierflow.state_processor._writer import SavepointWriter

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "BroadcastEntry",
    "BroadcastStateInfo",
    "KeyedEntry",
    "ListStateInfo",
    "OperatorInfo",
    "OperatorListEntry",
    "SavepointWriter",
    "Snapshot",
    "StateInfo",
    "StateReader",
    "TimerEntry",
    "load",
    "read",
]


class StateReader:
    """`spark.read`-shaped access to one state of a snapshot.

    Options: "uid" (required); "state" (a keyed state name, or with kind
    "operator_list" a list's name, with "broadcast" a broadcast state's); "kind"
    ("keyed", the default with "state", "operator", the default without,
    "operator_list", "broadcast" or "timers");
    "namespaced" ("true"/"false", map state only).
    """

    def __init__(self, spark: SparkSession) -> None:
        self._spark = spark
        self._options: dict[str, str] = {}

    def option(self, name: str, value: Any) -> StateReader:
        self._options[name] = str(value)
        return self

    def options(self, **options: Any) -> StateReader:
        for name, value in options.items():
            self.option(name, value)
        return self

    def load(self, path: str | os.PathLike[str]) -> DataFrame:
        if "uid" not in self._options:
            raise ValueError('set the operator with .option("uid", ...)')
        uid, state = self._options["uid"], self._options.get("state")
        kind = self._options.get("kind", "keyed" if state else "operator")
        snapshot = load(path)
        if kind == "keyed":
            if not state:
                raise ValueError('keyed state needs .option("state", <state name>)')
            namespaced = self._options.get("namespaced")
            return snapshot.keyed_state(
                self._spark,
                uid,
                state,
                namespaced=None if namespaced is None else namespaced.lower() == "true",
            )
        if kind == "operator":
            return snapshot.operator_state(self._spark, uid)
        if kind == "operator_list":
            return snapshot.operator_list_state(self._spark, uid, state)
        if kind == "broadcast":
            if not state:
                raise ValueError('broadcast state needs .option("state", <state name>)')
            return snapshot.broadcast_state(self._spark, uid, state)
        if kind == "timers":
            return snapshot.timers(self._spark, uid)
        raise ValueError(
            'kind must be "keyed", "operator", "operator_list", "broadcast" or "timers", '
            f"got {kind!r}"
        )


def read(spark: SparkSession) -> StateReader:
    """`read(spark).option("uid", "count").option("state", "reduce").load(path)`."""
    return StateReader(spark)
