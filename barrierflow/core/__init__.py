"""The user-facing contracts every layer above may use: function classes, `Duration`,
`CheckpointingMode`, watermarks and watermark strategies, `OutputTag`, state descriptors,
restart strategies, window function contracts, the window model (`windows/`: windows,
assigners, triggers, `MAX_TIMESTAMP` in `time.py`), the async function.

Nothing here imports another barrierflow package but the leaves (`errors`, `_clock`, ...);
the public names are exported by `barrierflow`, `barrierflow.functions`,
`barrierflow.window` and `barrierflow.state`.
"""
