"""PyFlink's `process_json_data` example, ported: parse JSON once in a map, then filter on
the parsed value (records are Python objects between steps, no second parse).

    python examples/pyflink/process_json_data.py
"""

from __future__ import annotations

import json

from barrierflow import StreamExecutionEnvironment

PEOPLE = [
    (1, '{"name": "Flink", "tel": 123, "addr": {"country": "Germany", "city": "Berlin"}}'),
    (2, '{"name": "hello", "tel": 135, "addr": {"country": "China", "city": "Shanghai"}}'),
    (3, '{"name": "world", "tel": 124, "addr": {"country": "USA", "city": "NewYork"}}'),
    (4, '{"name": "PyFlink", "tel": 32, "addr": {"country": "China", "city": "Hangzhou"}}'),
]


def parsed_with_next_tel(record):
    person = json.loads(record[1])
    person["tel"] += 1
    return record[0], person


def lives_in_china(record) -> bool:
    return "China" in record[1]["addr"]["country"]


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    env.from_collection(PEOPLE).map(parsed_with_next_tel).filter(lives_in_china).print()
    env.execute()


if __name__ == "__main__":
    main()
