"""PyFlink's `state_access` example, ported: a running sum per name in keyed value state
with a time-to-live, emitted at every element.

    python examples/pyflink/state_access.py
"""

from __future__ import annotations

from barrierflow import StreamExecutionEnvironment, Time, Types
from barrierflow.functions import KeyedProcessFunction, RuntimeContext
from barrierflow.state import StateTtlConfig, ValueStateDescriptor

PAYMENTS = [
    ("Alice", 110.1),
    ("Bob", 30.2),
    ("Alice", 20.0),
    ("Bob", 53.1),
    ("Alice", 13.1),
    ("Bob", 3.1),
    ("Bob", 16.1),
    ("Alice", 20.1),
]


class RunningSum(KeyedProcessFunction):
    """The sum of a name's amounts so far, kept for a second after its last use."""

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
        total = (self.total.value() or 0) + value[1]
        self.total.update(total)
        yield value[0], total


def main() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    payments = env.from_collection(PAYMENTS, type_info=Types.TUPLE([Types.STRING(), Types.FLOAT()]))
    payments.key_by(lambda payment: payment[0]).process(RunningSum()).print()
    env.execute()


if __name__ == "__main__":
    main()
