"""PyFlink's `event_time_timer` example, ported: a sum per name in keyed state with a
time-to-live, emitted by an event-time timer two seconds after each element.

    python examples/pyflink/event_time_timer.py
"""

from __future__ import annotations

from barrierflow import (
    Duration,
    StreamExecutionEnvironment,
    Time,
    TimestampAssigner,
    Types,
    WatermarkStrategy,
)
from barrierflow.functions import KeyedProcessFunction, RuntimeContext
from barrierflow.state import StateTtlConfig, ValueStateDescriptor

PAYMENTS = [  # (event time in ms, name, amount), out of order
    (1000, "Alice", 110.1),
    (4000, "Bob", 30.2),
    (3000, "Alice", 20.0),
    (2000, "Bob", 53.1),
    (5000, "Alice", 13.1),
    (3000, "Bob", 3.1),
    (7000, "Bob", 16.1),
    (10000, "Alice", 20.1),
]


class SumOnTimer(KeyedProcessFunction):
    """Adds each amount to the name's sum; each element's timer (2 s later) emits the sum."""

    def open(self, runtime_context: RuntimeContext) -> None:
        descriptor = ValueStateDescriptor("sum", Types.FLOAT())
        descriptor.enable_time_to_live(
            StateTtlConfig.new_builder(Time.seconds(1))
            .set_update_type(StateTtlConfig.UpdateType.OnReadAndWrite)
            .disable_cleanup_in_background()
            .build()
        )
        self.total = runtime_context.get_state(descriptor)

    def process_element(self, value, ctx):
        self.total.update((self.total.value() or 0) + value[2])
        ctx.timer_service().register_event_time_timer(ctx.timestamp() + 2000)

    def on_timer(self, timestamp: int, ctx):
        yield ctx.get_current_key(), self.total.value()


class FirstField(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp: int) -> int:
        return int(value[0])


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    payments = env.from_collection(
        PAYMENTS, type_info=Types.TUPLE([Types.LONG(), Types.STRING(), Types.FLOAT()])
    ).assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(
            Duration.of_seconds(2)
        ).with_timestamp_assigner(FirstField())
    )
    payments.key_by(lambda payment: payment[1]).process(SumOnTimer()).print()
    env.execute()


if __name__ == "__main__":
    main()
