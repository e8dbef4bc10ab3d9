"""Which shared files of incremental checkpoints are still needed (Flink's
`SharedStateRegistry`).

An incremental checkpoint references files in `<job folder>/shared/` that earlier
checkpoints uploaded; a file may be deleted only once no retained checkpoint references
it. The registry counts, per file (its name relative to the job folder), the retained
checkpoints that reference it: `register` when a checkpoint completes, `release` when it
is subsumed or dropped by retention, which returns the files nobody needs any more. It is
rebuilt at every driver start from the retained checkpoints' `_metadata` (`rebuild`), so
it survives driver restarts; `unreferenced` then tells which files of `shared/` (a sweep)
or of an aborted checkpoint's acknowledgements no retained checkpoint needs.

Files of a checkpoint restored in no-claim mode are `keep`-ed: never returned. Pure: no
files or clocks; the caller deletes what it returns (storage.py).
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["SharedStateRegistry"]


class SharedStateRegistry:
    """Reference counts of shared files by retained checkpoints. JobMaster thread only.

    Guarantees a name is returned by `release` or `unreferenced` only when no registered
    checkpoint references it and it is not kept, and that `release` returns each such name
    once. Assumes every retained checkpoint that references shared files was registered
    (or rebuilt) before anything is released or swept.

    >>> registry = SharedStateRegistry()
    >>> registry.register(1, ["shared/a", "shared/b"])
    >>> registry.register(2, ["shared/b", "shared/c"])
    >>> registry.release(1)
    ['shared/a']
    >>> registry.unreferenced(["shared/b", "shared/x"])
    ['shared/x']
    >>> registry.release(2)
    ['shared/b', 'shared/c']
    """

    def __init__(self) -> None:
        self._users: dict[str, set[int]] = {}
        """File name -> ids of the registered checkpoints that reference it."""
        self._files: dict[int, frozenset[str]] = {}
        """Checkpoint id -> the files it references (only checkpoints that reference any)."""
        self._kept: set[str] = set()
        """Files never returned: those of a checkpoint restored in no-claim mode."""

    @classmethod
    def rebuild(cls, checkpoints: Iterable[tuple[int, Iterable[str]]]) -> SharedStateRegistry:
        """The registry of the retained checkpoints given as (id, referenced names)."""
        registry = cls()
        for checkpoint_id, names in checkpoints:
            registry.register(checkpoint_id, names)
        return registry

    def register(self, checkpoint_id: int, names: Iterable[str]) -> None:
        """Checkpoint `checkpoint_id` completed (or is retained) referencing `names`.
        Registering the same checkpoint again replaces its names."""
        files = frozenset(names)
        if checkpoint_id in self._files:
            self.release(checkpoint_id)  # what it no longer names is not kept by it
        if not files:
            return
        self._files[checkpoint_id] = files
        for name in files:
            self._users.setdefault(name, set()).add(checkpoint_id)

    def release(self, checkpoint_id: int) -> list[str]:
        """Checkpoint `checkpoint_id` is no longer retained: the files it referenced that
        no other retained checkpoint references (and are not kept), sorted, to delete.
        Unknown ids (a full checkpoint, a savepoint) release nothing."""
        gone = []
        for name in self._files.pop(checkpoint_id, frozenset()):
            users = self._users[name]
            users.discard(checkpoint_id)
            if not users:
                del self._users[name]
                if name not in self._kept:
                    gone.append(name)
        return sorted(gone)

    def keep(self, names: Iterable[str]) -> None:
        """Never return `names` (a no-claim restore's files belong to the user)."""
        self._kept.update(names)

    def unreferenced(self, names: Iterable[str]) -> list[str]:
        """Of `names`, those no registered checkpoint references and that are not kept,
        sorted: what an aborted checkpoint uploaded, or a sweep of `shared/`, may delete."""
        return sorted({n for n in names if n not in self._users and n not in self._kept})

    @property
    def kept(self) -> frozenset[str]:
        return frozenset(self._kept)

    def is_referenced(self, name: str) -> bool:
        return name in self._users or name in self._kept

    @property
    def referenced(self) -> frozenset[str]:
        """Every file a registered checkpoint references."""
        return frozenset(self._users)

    def files_of(self, checkpoint_id: int) -> frozenset[str]:
        return self._files.get(checkpoint_id, frozenset())

    @property
    def checkpoint_ids(self) -> tuple[int, ...]:
        """The registered checkpoints that reference shared files, ascending."""
        return tuple(sorted(self._files))
