"""Shared test fakes and helpers, one module per idea; import as `support.<module>`.

`tests/` is on `sys.path` (pytest puts the folder of the top `conftest.py` there), so every
test, at any depth, imports `from support.clocks import ManualClock` the same way:

- `clocks`: the manual clock, in the shapes the code under test asks for.
- `waiting`: bounded waits on a condition or on a blocking call.
- `ttl`: the state TTL scenarios' constants, clock and config.
- `outputs`: outputs recording the watermarks and statuses emitted.
- `operator_harness`: drive one operator (or a short chain) directly, no Spark.
- `pg_server`, `nats_server`, `s3_server`, `s3_fault_proxy`, `kafka_cluster` (librdkafka's
  mock cluster): real servers started for a test session (fixtures registered in
  `tests/conftest.py`).
"""
