"""The user-facing contracts every layer above may use: function classes, `Duration`,
`CheckpointingMode`, watermarks and watermark strategies, `OutputTag`, state descriptors,
restart strategies, window function and trigger contracts, the async function.

Nothing here imports another barrierflow package but the leaves (`errors`, `_clock`, ...);
the public names are exported by `barrierflow`, `barrierflow.functions`,
`barrierflow.window` and `barrierflow.state`.
"""
