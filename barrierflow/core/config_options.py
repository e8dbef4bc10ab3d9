"""`ConfigOptions` / `ConfigOption`: typed configuration options (Flink's), for
`Configuration.set(option, value)` and `Configuration.get(option)`.

An option is a key, a type and maybe a default. `set` checks the value against the type and
stores Flink's text form (the form `Configuration` keeps every value in); `get` parses the
stored text back to the type, or gives the default.

>>> PARALLELISM = ConfigOptions.key("parallelism.default").int_type().default_value(1)
>>> PARALLELISM.key(), PARALLELISM.default_value(), PARALLELISM.has_default_value()
('parallelism.default', 1, True)
>>> PARALLELISM.to_text(4), PARALLELISM.from_text("4")
('4', 4)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from barrierflow.errors import ConfigurationError

T = TypeVar("T")

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)


def _integer(bounds: tuple[int, int]) -> Callable[[Any], bool]:
    def fits(value: Any) -> bool:
        return (
            isinstance(value, int)
            and not isinstance(value, bool)
            and (bounds[0] <= value <= bounds[1])
        )

    return fits


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, tuple[Callable[[Any], bool], Callable[[str], Any], str]] = {
    "bool": (lambda v: isinstance(v, bool), lambda t: {"true": True, "false": False}[t.lower()],
             "true or false"),
    "int": (_integer(_INT32), int, "a 32-bit integer"),
    "long": (_integer(_INT64), int, "a 64-bit integer"),
    "float": (_number, float, "a number"),
    "double": (_number, float, "a number"),
    "string": (lambda v: isinstance(v, str), str, "a string"),
}  # fmt: skip


class ConfigOption(Generic[T]):
    """A configuration key with its type and optional default; immutable."""

    def __init__(self, key: str, type_name: str, default: T | None, has_default: bool) -> None:
        self._key = key
        self._type = type_name
        self._default = default
        self._has_default = has_default

    def key(self) -> str:
        return self._key

    def default_value(self) -> T | None:
        return self._default

    def has_default_value(self) -> bool:
        return self._has_default

    def to_text(self, value: T) -> str:
        """`value` in Flink's text form, refused when it is not of the option's type."""
        fits, _, expected = _TYPES[self._type]
        if not fits(value):
            raise ConfigurationError(f"{self._key} must be {expected}, got {value!r}")
        if isinstance(value, bool):
            return "true" if value else "false"
        return str(value)

    def from_text(self, text: str) -> T:
        """The stored text parsed to the option's type (one line naming the key if it is not)."""
        _, parse, expected = _TYPES[self._type]
        try:
            value = parse(text.strip() if self._type != "string" else text)
        except (KeyError, ValueError):
            raise ConfigurationError(f"{self._key} must be {expected}, got {text!r}") from None
        if self._type in ("int", "long"):
            self.to_text(value)  # the range
        return value

    def __repr__(self) -> str:
        default = f", default {self._default!r}" if self._has_default else ""
        return f"ConfigOption({self._key!r}, {self._type}{default})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ConfigOption) and (
            (self._key, self._type, self._default, self._has_default)
            == (other._key, other._type, other._default, other._has_default)
        )

    def __hash__(self) -> int:
        return hash((self._key, self._type))


class ConfigOptions:
    """Builds a `ConfigOption`: `ConfigOptions.key(k).int_type().default_value(5)`."""

    @staticmethod
    def key(key: str) -> ConfigOptions.OptionBuilder:
        if not isinstance(key, str) or not key.strip():
            raise ConfigurationError(f"a config option needs a non-empty key, got {key!r}")
        return ConfigOptions.OptionBuilder(key)

    class OptionBuilder:
        """Picks the option's type."""

        def __init__(self, key: str) -> None:
            self._key = key

        def _typed(self, type_name: str) -> ConfigOptions.TypedConfigOptionBuilder[Any]:
            return ConfigOptions.TypedConfigOptionBuilder(self._key, type_name)

        def boolean_type(self) -> ConfigOptions.TypedConfigOptionBuilder[bool]:
            return self._typed("bool")

        def int_type(self) -> ConfigOptions.TypedConfigOptionBuilder[int]:
            return self._typed("int")

        def long_type(self) -> ConfigOptions.TypedConfigOptionBuilder[int]:
            return self._typed("long")

        def float_type(self) -> ConfigOptions.TypedConfigOptionBuilder[float]:
            return self._typed("float")

        def double_type(self) -> ConfigOptions.TypedConfigOptionBuilder[float]:
            return self._typed("double")

        def string_type(self) -> ConfigOptions.TypedConfigOptionBuilder[str]:
            return self._typed("string")

    class TypedConfigOptionBuilder(Generic[T]):
        """Gives the option a default, or none."""

        def __init__(self, key: str, type_name: str) -> None:
            self._key = key
            self._type = type_name

        def default_value(self, value: T) -> ConfigOption[T]:
            option: ConfigOption[T] = ConfigOption(self._key, self._type, None, False)
            option.to_text(value)  # refuses a default of the wrong type
            if self._type in ("float", "double"):
                value = float(value)  # type: ignore[assignment]
            return ConfigOption(self._key, self._type, value, True)

        def no_default_value(self) -> ConfigOption[T]:
            return ConfigOption(self._key, self._type, None, False)
