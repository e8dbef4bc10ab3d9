"""The shared-state registry, event by event: which shared files of incremental checkpoints
go when (completion, subsume, retention of 1/2/3, abort, rebuild after a driver restart,
sweep, claim / no-claim restores)."""

from __future__ import annotations

import pytest

from barrierflow.checkpoint.shared_state_registry import SharedStateRegistry


class Retention:
    """Completed checkpoints kept newest-`count`-first, as storage.retain does, releasing
    what it drops; `deleted` collects what the registry hands back, in order."""

    def __init__(self, count: int, registry: SharedStateRegistry | None = None) -> None:
        self.count = count
        self.registry = registry or SharedStateRegistry()
        self.retained: list[int] = list(self.registry.checkpoint_ids)
        self.deleted: list[str] = []

    def complete(self, checkpoint_id: int, names: list[str]) -> list[str]:
        """Register, then drop the oldest beyond `count`; returns what this deleted."""
        self.registry.register(checkpoint_id, names)
        self.retained.append(checkpoint_id)
        gone: list[str] = []
        while len(self.retained) > self.count:
            gone += self.registry.release(self.retained.pop(0))
        self.deleted += gone
        return gone


def test_a_file_goes_only_when_the_last_checkpoint_referencing_it_is_released():
    registry = SharedStateRegistry()
    registry.register(1, ["shared/a"])
    registry.register(2, ["shared/a", "shared/b"])
    registry.register(3, ["shared/a", "shared/b", "shared/c"])

    assert registry.release(1) == []
    assert registry.release(2) == []
    assert registry.referenced == {"shared/a", "shared/b", "shared/c"}
    assert registry.release(3) == ["shared/a", "shared/b", "shared/c"]
    assert registry.referenced == frozenset()
    assert registry.release(3) == []  # once only


@pytest.mark.parametrize(
    ("count", "deleted_after"),
    [
        # after each of checkpoints 1..4 completes: what retention deletes
        (1, [[], ["shared/1"], ["shared/2"], ["shared/0", "shared/3"]]),
        (2, [[], [], ["shared/1"], ["shared/2"]]),
        (3, [[], [], [], ["shared/1"]]),
    ],
)
def test_retention_deletes_what_no_retained_checkpoint_references(count, deleted_after):
    retention = Retention(count)
    # shared/0 is referenced by checkpoints 1-3 (compacted away before 4); shared/n is new
    # in checkpoint n and referenced by it only
    references = {
        1: ["shared/0", "shared/1"],
        2: ["shared/0", "shared/2"],
        3: ["shared/0", "shared/3"],
        4: ["shared/4"],
    }
    for n, expected in zip(references, deleted_after, strict=True):
        assert retention.complete(n, references[n]) == expected
        needed = {name for kept in retention.retained for name in references[kept]}
        assert retention.registry.referenced == needed


def test_a_file_shared_by_three_checkpoints_goes_with_the_last_of_them():
    retention = Retention(2)
    retention.complete(1, ["shared/base", "shared/x1"])
    retention.complete(2, ["shared/base", "shared/x2"])
    retention.complete(3, ["shared/base", "shared/x3"])
    assert "shared/base" not in retention.deleted  # 2 and 3 still reference it
    retention.complete(4, ["shared/x4"])
    assert "shared/base" not in retention.deleted  # 3 still does
    assert retention.complete(5, ["shared/x5"]) == ["shared/base", "shared/x3"]


def test_an_aborted_checkpoint_deletes_only_its_new_files_nobody_references():
    registry = SharedStateRegistry()
    registry.register(1, ["shared/a", "shared/b"])
    # checkpoint 2 acknowledged a (reused) and c (new) and was aborted
    assert registry.unreferenced(["shared/c"]) == ["shared/c"]
    assert registry.unreferenced(["shared/a", "shared/c"]) == ["shared/c"]
    assert registry.referenced == {"shared/a", "shared/b"}  # nothing released


def test_a_full_checkpoint_or_savepoint_releases_nothing():
    registry = SharedStateRegistry()
    registry.register(1, [])
    assert registry.checkpoint_ids == ()
    assert registry.release(1) == []
    assert registry.release(99) == []


def test_registering_a_checkpoint_again_replaces_its_files():
    registry = SharedStateRegistry()
    registry.register(1, ["shared/a", "shared/b"])
    registry.register(1, ["shared/b"])
    assert registry.files_of(1) == {"shared/b"}
    assert registry.unreferenced(["shared/a"]) == ["shared/a"]


def test_rebuilt_after_a_driver_restart_it_releases_as_the_old_one_would():
    before = Retention(2)
    before.complete(1, ["shared/a", "shared/b"])
    before.complete(2, ["shared/a", "shared/c"])
    before.complete(3, ["shared/a", "shared/d"])  # 1 goes: b
    assert before.deleted == ["shared/b"]

    # the driver restarts: the registry comes back from the retained checkpoints' _metadata
    rebuilt = SharedStateRegistry.rebuild(
        [(2, ["shared/a", "shared/c"]), (3, ["shared/a", "shared/d"])]
    )
    after = Retention(2, rebuilt)
    assert after.retained == [2, 3]
    assert after.complete(4, ["shared/e"]) == ["shared/c"]
    assert after.complete(5, ["shared/e"]) == ["shared/a", "shared/d"]


def test_the_sweep_at_start_deletes_what_no_retained_checkpoint_references():
    registry = SharedStateRegistry.rebuild([(7, ["shared/a"]), (8, ["shared/a", "shared/b"])])
    on_disk = ["shared/a", "shared/b", "shared/orphan-of-aborted", "shared/orphan-of-killed"]
    assert registry.unreferenced(on_disk) == ["shared/orphan-of-aborted", "shared/orphan-of-killed"]


def test_no_claim_files_are_never_returned_and_claim_files_go_when_subsumed():
    # no-claim: the restored checkpoint 5's files stay the user's, even once nothing here
    # references them
    registry = SharedStateRegistry.rebuild([(5, ["shared/a", "shared/b"])])
    registry.keep(registry.files_of(5))
    retention = Retention(1, registry)
    retention.retained = []  # a protected checkpoint is not among the retained
    retention.complete(6, ["shared/a", "shared/c"])
    assert registry.release(5) == []
    assert retention.complete(7, ["shared/d"]) == ["shared/c"]
    assert registry.unreferenced(["shared/a", "shared/b"]) == []

    # claim: checkpoint 5 joins the retained set, its files go when it is subsumed
    claimed = Retention(1, SharedStateRegistry.rebuild([(5, ["shared/a", "shared/b"])]))
    assert claimed.complete(6, ["shared/a", "shared/c"]) == ["shared/b"]
    assert claimed.complete(7, ["shared/d"]) == ["shared/a", "shared/c"]
