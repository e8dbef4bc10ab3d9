"""What a task measures about itself and reports to the JobMaster in its metrics heartbeat.

`mailbox_time` splits the mailbox loop's time into busy, idle and backpressured;
`operator_metrics` counts what each operator of the chain takes and emits (per batch);
`task_metrics` gathers both with the bytes of the channels and the user metrics into the
values of one `TaskMetricsReport`. Mailbox thread only: plain ints, no locks.
"""

from barrierflow.runtime.metrics.mailbox_time import MailboxTime
from barrierflow.runtime.metrics.operator_metrics import MeteredOutput, OperatorMetrics
from barrierflow.runtime.metrics.task_metrics import TaskMetrics

__all__ = ["MailboxTime", "MeteredOutput", "OperatorMetrics", "TaskMetrics"]
