"""What a Spark task runs: unpack its descriptor, connect to the JobMaster, run the StreamTask.

The payload is `(descriptors, settings)`: the `TaskDescriptor` of every subtask by
SubtaskId (`graph.deployment.build_task_descriptors`) and the attempt's `TaskSettings`.
"""

from __future__ import annotations

import logging
import pickle
import queue
from collections.abc import Iterable, Iterator
from typing import Any

from barrierflow.cluster.rpc import RpcClient
from barrierflow.runtime.task import StreamTask


def run_partitions(payload: bytes, partitions: Iterable[int]) -> Iterator[Any]:
    """The mapPartitions function of the barrier stage: one partition = one subtask."""
    logging.basicConfig(level=logging.WARNING)
    descriptors, settings = pickle.loads(payload)
    for partition in partitions:
        mailbox: queue.SimpleQueue = queue.SimpleQueue()
        rpc = RpcClient(
            settings.jobmaster_address, settings.secret, mailbox.put, job_id=settings.job_id
        )
        descriptor = descriptors[settings.partitions[partition]]
        try:
            StreamTask(descriptor, settings, partition, rpc.send, mailbox).run()
        finally:
            rpc.close()
    return iter(())
