"""Event-time and processing-time timers of one keyed operator (Flink's InternalTimerServiceImpl).

Mailbox thread only. The service is pure logic: it owns no clock, no thread and no
file. The task feeds it watermarks (`advance_watermark`) and wake-ups
(`on_processing_time`); the service calls its `triggerable` back for every due
timer, in firing order, and tells the task when to wake it next
(`next_processing_time`).

Modules: `timer` (the Timer and its order), `priority_queue` (the timers of one
time domain: a heap of timestamps over per-timestamp buckets, indexed per key
group), `service` (the InternalTimerService, its restore) and `snapshot` (what
a snapshot copies at the barrier, encoded later on the uploader thread). A
snapshot is cut per key group, so a subtask with another key-group range restores
exactly its own timers (rescaling).

>>> fired = []
>>> class Printer:
...     def on_event_time(self, timer):
...         fired.append(timer.timestamp)
...     def on_processing_time(self, timer):
...         fired.append(("processing", timer.timestamp))
>>> from barrierflow.state.key_groups import KeyGroupRange
>>> service = InternalTimerService(KeyGroupRange(0, 127), 128, Printer())
>>> service.register_event_time_timer("alice", None, 20)
>>> service.register_event_time_timer("alice", None, 10)
>>> service.register_event_time_timer("alice", None, 10)  # deduplicated
>>> service.num_event_time_timers()
2
>>> service.advance_watermark(15)
>>> fired
[10]
>>> service.register_processing_time_timer("bob", None, 1_000)
>>> service.next_processing_time()
1000
>>> service.on_processing_time(1_000)
>>> fired
[10, ('processing', 1000)]
"""

from barrierflow.runtime.timers.service import InternalTimerService
from barrierflow.runtime.timers.snapshot import SNAPSHOT_KIND, TimerSnapshot, timer_section
from barrierflow.runtime.timers.timer import MAX_TIMESTAMP, MIN_WATERMARK, Timer, Triggerable

__all__ = [
    "MAX_TIMESTAMP",
    "MIN_WATERMARK",
    "SNAPSHOT_KIND",
    "InternalTimerService",
    "Timer",
    "TimerSnapshot",
    "Triggerable",
    "timer_section",
]
