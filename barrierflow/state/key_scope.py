"""What every keyed state backend does alike: the current key and its key group, the kinds of
its states, and the checks of a restored header, with one wording of their errors.

>>> from barrierflow.state.key_groups import KeyGroupRange
>>> scope = KeyScope(KeyGroupRange(0, 63), 128)
>>> scope.set_current_key("alice")
>>> scope.current_key, 0 <= scope.current_key_group <= 63
('alice', True)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

from barrierflow.core.state_descriptors import StateDescriptor, StateKind
from barrierflow.errors import ConfigurationError, StateRestoreError, StreamCorruptionError
from barrierflow.state.key_groups import KeyGroupRange, stable_hash

NO_KEY = object()
"""The current key before the first `set_current_key` (None is a key like any other)."""


class KeyScope:
    """Base of the keyed state backends: the key-group range, the current key, the states'
    kinds (as declared, or as a restored snapshot holds them)."""

    def __init__(self, key_group_range: KeyGroupRange, max_parallelism: int) -> None:
        self.key_group_range = key_group_range
        self.max_parallelism = max_parallelism
        self._start = key_group_range.start
        self._count = len(key_group_range)
        self._current_key: Any = NO_KEY
        self._current_index: Any = None
        """Current key group minus the range's start: the index into per-key-group tables."""
        self._kinds: dict[str, StateKind] = {}
        self._restored: set[str] = set()
        """Names of states whose kind came from a restored snapshot."""

    # ---- the current key (hot path) --------------------------------------------------------

    def set_current_key(self, key: Any) -> None:
        """Scope every state to `key` until the next call."""
        index = stable_hash(key) % self.max_parallelism - self._start
        if index < 0 or index >= self._count:
            self._routing_error(key, index + self._start)
        self._current_key = key
        self._current_index = index

    prefetches = False
    """Whether `prefetch` does anything: operators compute a batch's keys ahead of its
    records only for a backend that says so (the on-disk one)."""

    def prefetch(self, keys: Sequence[Any]) -> None:
        """Nothing to bring closer: a backend that holds its state in memory reads it as fast."""

    @property
    def current_key(self) -> Any:
        """The key set last, or None before the first `set_current_key`."""
        return None if self._current_key is NO_KEY else self._current_key

    @property
    def current_key_group(self) -> int | None:
        """The key group of the current key, or None before the first `set_current_key`."""
        return None if self._current_index is None else self._current_index + self._start

    def _routing_error(self, key: Any, key_group: int) -> NoReturn:
        raise StreamCorruptionError(
            f"key {key!r:.200} is in key group {key_group}, outside this subtask's key groups "
            f"[{self.key_group_range.start}, {self.key_group_range.end}] (max parallelism "
            f"{self.max_parallelism}): the record was routed to the wrong subtask"
        )

    # ---- the states' kinds -----------------------------------------------------------------

    def _kind_of(self, name: str, kind: StateKind) -> StateKind:
        """The kind state `name` has, registering it as `kind` if it is new."""
        return self._kinds.setdefault(name, kind)

    def _declared(self, descriptor: StateDescriptor, expected: type[StateDescriptor]) -> str:
        """The name of the state `descriptor` declares, once its kind agrees with what this
        backend holds under that name (StateRestoreError if a restored snapshot holds it as
        another kind, ConfigurationError if the job declared it as another kind before)."""
        if not isinstance(descriptor, expected):
            raise ConfigurationError(f"expected a {expected.__name__}, got {descriptor!r:.200}")
        name = descriptor.name
        kind = self._kind_of(name, descriptor.kind)
        if kind is not descriptor.kind and name in self._restored:
            raise StateRestoreError(
                f"the checkpoint holds state {name!r} as {kind.value} state, this job declares "
                f"it as {descriptor.kind.value} state"
            )
        if kind is not descriptor.kind:
            raise ConfigurationError(
                f"state {name!r} is {kind.value} state; it cannot also be {descriptor.kind.value} "
                "state. Give each state its own name"
            )
        return name

    def _restored_states(self, header: Any) -> list[tuple[str, StateKind]]:
        """The states of a restored keyed header, registered as restored, once its version,
        max parallelism and kinds fit this backend (StateRestoreError otherwise)."""
        check_keyed_header_version(header)
        if header.get("max_parallelism") != self.max_parallelism:
            raise StateRestoreError(
                f"keyed state was taken with max parallelism {header.get('max_parallelism')}, "
                f"this operator has {self.max_parallelism}; key groups cannot be redistributed"
            )
        try:
            states = [(str(name), StateKind(kind)) for name, kind in header["states"]]
        except (KeyError, TypeError, ValueError) as error:
            raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error
        for name, kind in states:
            known = self._kind_of(name, kind)
            self._restored.add(name)
            if known is not kind:
                raise StateRestoreError(
                    f"the checkpoint holds state {name!r} as {kind.value} state, this job "
                    f"declares it as {known.value} state"
                )
        return states


KEYED_STATE_VERSION = 1
"""Schema of the keyed-state header and sections. Readers take 1 up to this."""


def unhashable_key(key: Any) -> ConfigurationError:
    """The error for a key the state cannot hold because it is unhashable (a list from the key
    selector, most often), worded once for both backends."""
    return ConfigurationError(
        f"keyed state needs a hashable key; key {key!r:.200} is a "
        f"{type(key).__name__}. Return a tuple instead of a list from the key selector"
    )


def check_keyed_header_version(header: Any) -> None:
    """Refuse a keyed-state header that is no map, or of a version this release cannot read."""
    check_header_version(header, "keyed state", KEYED_STATE_VERSION)


def check_header_version(header: Any, what: str, newest: int) -> None:
    """Refuse the header of `what` if it is no map or its "version" is not 1 to `newest`."""
    if not isinstance(header, dict):
        raise StateRestoreError(f"the header of {what} must be a dict, found {header!r:.200}")
    version = header.get("version")
    if not isinstance(version, int) or not 1 <= version <= newest:
        raise StateRestoreError(
            f"{what} has version {version!r}; this barrierflow reads versions 1 to {newest}"
        )
