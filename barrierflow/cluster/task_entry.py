"""What a Spark task runs: unpack the job, connect to the JobMaster, run the StreamTask."""

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
    graph, settings = pickle.loads(payload)
    for partition in partitions:
        mailbox: queue.SimpleQueue = queue.SimpleQueue()
        rpc = RpcClient(settings.jobmaster_address, settings.secret, mailbox.put)
        try:
            StreamTask(graph, settings, partition, rpc.send, mailbox).run()
        finally:
            rpc.close()
    return iter(())
