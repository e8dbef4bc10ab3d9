"""`IntervalJoinSpec`: everything one interval join operator is built from, checked on creation.

>>> def pair(left, right, ctx):
...     return [(left, right)]
>>> spec = IntervalJoinSpec.create(-5, 10, process_join_function=pair, upper_inclusive=False)
>>> (spec.lower_bound, spec.upper_bound, spec.lower_inclusive, spec.upper_inclusive)
(-5, 10, True, False)
>>> spec.create_logic().upper_bound        # exclusive 10 is inclusive 9
9
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from barrierflow.core.join_functions import as_process_join
from barrierflow.core.time import Duration
from barrierflow.runtime.joins.interval_join import IntervalJoinLogic, interval_bounds

__all__ = ["IntervalJoinSpec"]


@dataclass(frozen=True)
class IntervalJoinSpec:
    """Everything the runtime needs to build one interval join operator; checked on creation."""

    lower_bound: int
    upper_bound: int
    lower_inclusive: bool
    upper_inclusive: bool
    process_join_function: Any
    left_late_data_output_tag: Any = None
    """Where left elements below the watermark go (None: dropped and counted)."""
    right_late_data_output_tag: Any = None
    output_type: Any = None

    @staticmethod
    def create(
        lower_bound: int | Duration,
        upper_bound: int | Duration,
        *,
        process_join_function: Any,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
        left_late_data_output_tag: Any = None,
        right_late_data_output_tag: Any = None,
        output_type: Any = None,
    ) -> IntervalJoinSpec:
        lower, upper = interval_bounds(lower_bound, upper_bound)
        as_process_join(process_join_function)  # raises for what is not a join function
        return IntervalJoinSpec(
            lower,
            upper,
            lower_inclusive,
            upper_inclusive,
            process_join_function,
            left_late_data_output_tag,
            right_late_data_output_tag,
            output_type,
        )

    def create_logic(self) -> IntervalJoinLogic:
        """Fresh join logic for one subtask."""
        return IntervalJoinLogic(
            self.lower_bound,
            self.upper_bound,
            self.lower_inclusive,
            self.upper_inclusive,
            self.process_join_function,
        )
