"""PyFlink's `basic_operations` example, ported: map, filter and a keyed sum over rows with
named fields, each step run as its own job (PyFlink starts a fresh job at every `execute()`).

    python examples/pyflink/basic_operations.py
"""

from __future__ import annotations

import json

from barrierflow import StreamExecutionEnvironment, Types

PEOPLE = [
    (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany", "city": "Berlin"}}'),
    (2, '{"name": "hello", "tel": 135, "addr": {"country": "China", "city": "Shanghai"}}'),
    (3, '{"name": "world", "tel": 124, "addr": {"country": "USA", "city": "NewYork"}}'),
    (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China", "city": "Hangzhou"}}'),
]


def next_tel(row):
    """The row's id and its JSON with the phone number one higher."""
    person = json.loads(row.info)
    person["tel"] += 1
    return row.id, json.dumps(person)


def country_and_tel(row):
    person = json.loads(row.info)
    return person["addr"]["country"], person["tel"]


def run(stream, env) -> None:
    stream.print()
    env.execute()


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    people = env.from_collection(
        PEOPLE, type_info=Types.ROW_NAMED(["id", "info"], [Types.INT(), Types.STRING()])
    )
    run(people.map(next_tel), env)  # every row, tel + 1
    run(people.filter(lambda row: row.id == 1).map(next_tel), env)  # only id 1
    run(people.map(country_and_tel).key_by(lambda pair: pair[0]).sum(1), env)  # running sums


if __name__ == "__main__":
    main()
