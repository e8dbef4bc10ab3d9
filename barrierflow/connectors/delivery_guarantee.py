"""DeliveryGuarantee: what a sink promises about its records after failures (PyFlink's enum).

PyFlink has it in `pyflink.datastream.connectors.base`; barrierflow exports it from
`barrierflow.connectors` so a ported job imports it from one place. Sinks that offer a
choice (`KafkaSink.builder().set_delivery_guarantee(...)`) take it.
"""

from __future__ import annotations

from enum import Enum

__all__ = ["DeliveryGuarantee"]


class DeliveryGuarantee(Enum):
    """What a sink promises when the job fails and restarts from a checkpoint.

    - `EXACTLY_ONCE`: each record is visible once, also after failures (the sink commits
      in step with checkpoints, and readers see only what is committed).
    - `AT_LEAST_ONCE`: no record is lost; a restart may write some again (the sink flushes
      at every checkpoint barrier).
    - `NONE`: best effort: records may be lost or written twice; the fastest.

    >>> DeliveryGuarantee["AT_LEAST_ONCE"] is DeliveryGuarantee.AT_LEAST_ONCE
    True
    """

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2
