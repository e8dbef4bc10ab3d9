"""The metrics a user function registers, with PyFlink's names (`pyflink.metrics`).

A function asks its runtime context for its operator's `MetricGroup` in `open` and
registers its metrics there; each task reports them to the JobMaster with its own
metrics (`env.get_config().set_metrics_interval(ms)`, default every second), and they
appear in `/metrics` as `barrierflow_user_<name>` and in the vertex metrics of the REST
endpoint as `<subtask>.<operator>.<name>`. Updating a metric is a plain attribute change:
functions run on their task's one thread.

>>> from barrierflow.functions import MapFunction
>>> class CountingMap(MapFunction):
...     def open(self, runtime_context):
...         self.seen = runtime_context.get_metrics_group().counter("my_counter")
...     def map(self, value):
...         self.seen.inc()
...         return value
>>> group = MetricGroup()              # what a running task's runtime context hands out
>>> class Context:
...     def get_metrics_group(self): return group
>>> mapper = CountingMap()
>>> mapper.open(Context())
>>> [mapper.map(word) for word in ("a", "b")]
['a', 'b']
>>> list(group.values())
[('my_counter', 'counter', 2)]
"""

from barrierflow.core.metrics import Counter, Distribution, Gauge, Meter, MetricGroup

__all__ = ["Counter", "Distribution", "Gauge", "Meter", "MetricGroup"]
