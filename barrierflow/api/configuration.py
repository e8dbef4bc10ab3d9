"""`Configuration` (PyFlink's `pyflink.common.Configuration`): key/value settings a job hands
to `get_execution_environment(configuration)` or `env.configure(configuration)`.

Values are kept as Flink keeps them, as strings (`to_dict()`); the typed getters parse them.
`StreamExecutionEnvironment` applies the keys it knows (`KNOWN_KEYS`); `spark.*` keys become
the Spark session's settings; any other key is kept as given and can be read back from
`env.get_configuration()`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from barrierflow.core.config_options import ConfigOption
from barrierflow.errors import ConfigurationError

if TYPE_CHECKING:
    from barrierflow.api.environment import StreamExecutionEnvironment

KNOWN_KEYS = (
    "parallelism.default",
    "pipeline.max-parallelism",
    "pipeline.name",
    "pipeline.auto-watermark-interval",
    "pipeline.operator-chaining.enabled",
    "pipeline.global-job-parameters",
    "execution.runtime-mode",
    "execution.buffer-timeout",
    "execution.checkpointing.interval",
    "execution.checkpointing.mode",
    "execution.checkpointing.dir",
    "state.checkpoints.dir",
    "execution.checkpointing.savepoint-dir",
    "state.savepoints.dir",
    "state.backend.type",
)
"""The Flink options barrierflow applies (see `StreamExecutionEnvironment.configure`)."""


class Configuration:
    """Key/value settings, values kept as strings (Flink's form).

    >>> config = Configuration().set_integer("parallelism.default", 2)
    >>> config.set_boolean("pipeline.operator-chaining.enabled", False).to_dict()
    {'parallelism.default': '2', 'pipeline.operator-chaining.enabled': 'false'}
    >>> config.get_integer("parallelism.default", 1), config.get_string("missing", "x")
    (2, 'x')
    """

    def __init__(self, other: Configuration | None = None) -> None:
        self._values: dict[str, str] = dict(other._values) if other is not None else {}

    @classmethod
    def from_dict(cls, map: Mapping[str, Any]) -> Configuration:
        config = cls()
        for key, value in map.items():
            config._values[_key(key)] = _text(value)
        return config

    def get_string(self, key: str, default_value: str) -> str:
        return self._values.get(key, default_value)

    def set_string(self, key: str, value: str) -> Configuration:
        self._values[_key(key)] = _text(value)
        return self

    def get_integer(self, key: str, default_value: int) -> int:
        text = self._values.get(key)
        if text is None:
            return default_value
        try:
            return int(text)
        except ValueError:
            raise ConfigurationError(f"{key} must be an integer, got {text!r}") from None

    def set_integer(self, key: str, value: int) -> Configuration:
        return self.set_string(key, str(int(value)))

    def get_boolean(self, key: str, default_value: bool) -> bool:
        text = self._values.get(key)
        if text is None:
            return default_value
        if text.lower() not in ("true", "false"):
            raise ConfigurationError(f"{key} must be true or false, got {text!r}")
        return text.lower() == "true"

    def set_boolean(self, key: str, value: bool) -> Configuration:
        return self.set_string(key, "true" if value else "false")

    def get_float(self, key: str, default_value: float) -> float:
        text = self._values.get(key)
        if text is None:
            return float(default_value)
        try:
            return float(text)
        except ValueError:
            raise ConfigurationError(f"{key} must be a number, got {text!r}") from None

    def set_float(self, key: str, value: float) -> Configuration:
        return self.set_string(key, repr(float(value)))

    def get_bytearray(self, key: str, default_value: bytearray) -> bytearray:
        text = self._values.get(key)
        return default_value if text is None else bytearray(text.encode("latin-1"))

    def set_bytearray(self, key: str, value: bytearray) -> Configuration:
        return self.set_string(key, bytes(value).decode("latin-1"))

    def set(self, option: ConfigOption[Any], value: Any) -> Configuration:
        """A typed option's value (refused when not of the option's type), kept as text."""
        if not isinstance(option, ConfigOption):
            raise ConfigurationError(f"Configuration.set needs a ConfigOption, got {option!r}")
        return self.set_string(option.key(), option.to_text(value))

    def get(self, option: ConfigOption[Any]) -> Any:
        """A typed option's value, parsed from its text; its default (or None) when unset."""
        if not isinstance(option, ConfigOption):
            raise ConfigurationError(f"Configuration.get needs a ConfigOption, got {option!r}")
        text = self._values.get(option.key())
        return option.default_value() if text is None else option.from_text(text)

    def key_set(self) -> set[str]:
        return set(self._values)

    def add_all_to_dict(self, target_dict: dict[str, Any]) -> None:
        target_dict.update(self._values)

    def add_all(self, other: Configuration, prefix: str | None = None) -> Configuration:
        for key, value in other._values.items():
            self._values[(prefix or "") + key] = value
        return self

    def contains_key(self, key: str) -> bool:
        return key in self._values

    def to_dict(self) -> dict[str, str]:
        return dict(self._values)

    def remove_config(self, key: str) -> bool:
        return self._values.pop(key, None) is not None

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Configuration) and self._values == other._values

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._values.items())))

    def __str__(self) -> str:
        return str(self._values)

    __repr__ = __str__


def _key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"a configuration key must be a non-empty string, got {key!r}")
    return key


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


_UNITS_MS = {
    "": 1, "ms": 1, "milli": 1, "millis": 1, "millisecond": 1, "milliseconds": 1,
    "s": 1000, "sec": 1000, "secs": 1000, "second": 1000, "seconds": 1000,
    "m": 60_000, "min": 60_000, "mins": 60_000, "minute": 60_000, "minutes": 60_000,
    "h": 3_600_000, "hour": 3_600_000, "hours": 3_600_000,
    "d": 86_400_000, "day": 86_400_000, "days": 86_400_000,
}  # fmt: skip


def duration_ms(key: str, text: str) -> int:
    """A Flink duration option ("500", "500 ms", "10 s", "1 min") in milliseconds.

    >>> duration_ms("execution.checkpointing.interval", "10 s")
    10000
    >>> duration_ms("execution.checkpointing.interval", "soon")
    Traceback (most recent call last):
    ...
    barrierflow.errors.ConfigurationError: execution.checkpointing.interval must be a \
duration such as '500 ms', '10 s' or '1 min', got 'soon'
    """
    match = re.fullmatch(r"\s*(\d+)\s*([a-z]*)\s*", text.lower())
    if match is None or match.group(2) not in _UNITS_MS:
        raise ConfigurationError(
            f"{key} must be a duration such as '500 ms', '10 s' or '1 min', got {text!r}"
        )
    return int(match.group(1)) * _UNITS_MS[match.group(2)]


def job_parameters(key: str, text: str) -> dict[str, str]:
    """Flink's map option form "k1:v1,k2:v2" (pipeline.global-job-parameters).

    >>> job_parameters("pipeline.global-job-parameters", "region:eu, threshold:3")
    {'region': 'eu', 'threshold': '3'}
    """
    parameters = {}
    for entry in filter(None, (part.strip() for part in text.split(","))):
        name, colon, value = entry.partition(":")
        if not colon or not name.strip():
            raise ConfigurationError(f"{key} must be 'key:value,key:value', got {text!r}")
        parameters[name.strip()] = value.strip()
    return parameters


def apply_to(env: StreamExecutionEnvironment, configuration: Configuration) -> None:
    """Apply `configuration` to `env` (`env.configure`): each key it knows through the setter
    of the same meaning (a bad value fails here, naming the key), `spark.*` keys to the
    Spark session's settings; every key, known or not, is kept in `env.get_configuration()`.
    A key not set leaves its setting as it was, as in PyFlink."""
    from barrierflow.core.checkpointing_mode import CheckpointingMode
    from barrierflow.core.runtime_execution_mode import RuntimeExecutionMode
    from barrierflow.core.state_backends import (
        EmbeddedRocksDBStateBackend,
        HashMapStateBackend,
    )

    if not isinstance(configuration, Configuration):
        raise ConfigurationError(f"configure needs a Configuration, got {configuration!r:.100}")
    values = configuration.to_dict()

    def text(key: str) -> str | None:
        return values.get(key)

    if (value := text("parallelism.default")) is not None:
        env.set_parallelism(configuration.get_integer("parallelism.default", 0))
    if (value := text("pipeline.max-parallelism")) is not None:
        env.set_max_parallelism(configuration.get_integer("pipeline.max-parallelism", 0))
    if (value := text("pipeline.auto-watermark-interval")) is not None:
        interval = duration_ms("pipeline.auto-watermark-interval", value)
        env.get_config().set_auto_watermark_interval(interval)
    if text("pipeline.operator-chaining.enabled") is not None:
        env._chaining = configuration.get_boolean("pipeline.operator-chaining.enabled", True)
    if (value := text("pipeline.global-job-parameters")) is not None:
        parameters = job_parameters("pipeline.global-job-parameters", value)
        env.get_config().set_global_job_parameters(parameters)
    if (value := text("execution.runtime-mode")) is not None:
        modes = {mode.name: mode for mode in RuntimeExecutionMode}
        if value.upper() not in modes:
            raise ConfigurationError(
                f"execution.runtime-mode must be STREAMING, BATCH or AUTOMATIC, got {value!r}"
            )
        env.set_runtime_mode(modes[value.upper()])
    if (value := text("execution.buffer-timeout")) is not None:
        env.set_buffer_timeout(duration_ms("execution.buffer-timeout", value))
    checkpoints = env.get_checkpoint_config()
    if (value := text("execution.checkpointing.interval")) is not None:
        env.enable_checkpointing(duration_ms("execution.checkpointing.interval", value))
    if (value := text("execution.checkpointing.mode")) is not None:
        if value.upper() not in ("EXACTLY_ONCE", "AT_LEAST_ONCE"):
            raise ConfigurationError(
                f"execution.checkpointing.mode must be EXACTLY_ONCE or AT_LEAST_ONCE, got {value!r}"
            )
        checkpoints.set_checkpointing_mode(CheckpointingMode[value.upper()])
    for key in ("state.checkpoints.dir", "execution.checkpointing.dir"):
        if (value := text(key)) is not None:
            checkpoints.set_checkpoint_storage(value)
    for key in ("state.savepoints.dir", "execution.checkpointing.savepoint-dir"):
        if (value := text(key)) is not None:
            checkpoints.set_default_savepoint_dir(value)
    if (value := text("state.backend.type")) is not None:
        backends = {"hashmap": HashMapStateBackend, "rocksdb": EmbeddedRocksDBStateBackend}
        if value.lower() not in backends:
            raise ConfigurationError(
                f"state.backend.type must be hashmap or rocksdb, got {value!r}"
            )
        env.set_state_backend(backends[value.lower()]())
    env._configuration.add_all(configuration)
