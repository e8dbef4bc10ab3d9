"""PyFlink's path of `NumberSequenceSource` (`pyflink.datastream.connectors.number_seq`):
the integers from `start` to `end`, both included, each exactly once. The class lives in
`barrierflow.connectors.datagen`, beside the generator source it is built on.

>>> source = NumberSequenceSource(1, 3)
>>> source.create_reader(source.create_splits()).poll_batch(10)
[1, 2, 3]
"""

from barrierflow.connectors.datagen import NumberSequenceSource

__all__ = ["NumberSequenceSource"]
