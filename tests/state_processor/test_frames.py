"""Cells read back from a DataFrame become the values a job keeps (no Spark session needed)."""

from __future__ import annotations

import pickle

from pyspark.sql import Row
from pyspark.sql.types import BinaryType, LongType, StructField, StructType

from barrierflow.state_processor._frames import DATACLASS, PICKLED, python_value
from barrierflow.window import TimeWindow


def test_structs_become_tuples_and_arrays_lists():
    assert python_value(Row(_1="ant", _2=[1, Row(_1=2)])) == ("ant", [1, (2,)])


def test_a_pickled_column_is_unpickled():
    field = StructField("value", BinaryType(), True, {PICKLED: True})
    assert python_value(bytearray(pickle.dumps({1, 2})), field) == {1, 2}


def test_a_dataclass_column_is_rebuilt_as_its_class():
    struct = StructType([StructField("start", LongType()), StructField("end", LongType())])
    field = StructField("namespace", struct, True, {DATACLASS: "barrierflow.window:TimeWindow"})
    assert python_value(Row(start=0, end=10), field) == TimeWindow(0, 10)
