"""The window model: windows, window assigners and triggers (public as `barrierflow.window`).

It sits below the runtime, so the window operator, its timers and its state type a
window as `Window` and read the end of time from `barrierflow.core.time.MAX_TIMESTAMP`.

- `window`: `Window`, `TimeWindow`, `GlobalWindow`, `CountWindow`.
- `assigners`: `WindowAssigner`, `MergingWindowAssigner`, tumbling, sliding and global windows.
- `count_assigners`: PyFlink's count windows (`CountTumblingWindowAssigner`,
  `CountSlidingWindowAssigner`), counting each key's elements in keyed state.
- `sessions`: `SessionWindows`, the one session assigner behind PyFlink's four session names.
- `triggers`: `Trigger`, `TriggerResult` and the built-in triggers.
- `serializers`: PyFlink's window serializers (the bytes PyFlink writes; the operator
  never calls them).
"""
