"""The lease's decisions event by event: a start facing no lease, a live one, an expired one, one
of a dead or reused pid on this machine, one of another machine; a holder renewing, losing it
to a takeover, failing to renew until it expires. Pure: no files, no clock, no processes."""

from __future__ import annotations

import pytest

from barrierflow.checkpoint.lease_rules import (
    Holder,
    Lease,
    Lost,
    ProcessState,
    Refuse,
    Take,
    check_renewal,
    first_lease,
    judge,
    lost_message,
    refusal_message,
    renewal_failed,
)

EXPIRY = 30_000
HERE = "boot-1 pid:[1]"


def holder(job_id: str, *, host="h1", machine=HERE, pid=100, start="555", rest=None) -> Holder:
    return Holder(job_id, f"run-{job_id}", "word-count", host, pid, machine, start, rest)


ME = holder("me", pid=200, start="777")


class Probe:
    """What `ps` would say about pids of this machine; records what was asked."""

    def __init__(self, **states: ProcessState) -> None:
        self.states = {int(pid[1:]): state for pid, state in states.items()}
        self.asked: list[tuple[int, str | None]] = []

    def __call__(self, pid: int, start: str | None) -> ProcessState:
        self.asked.append((pid, start))
        return self.states.get(pid, ProcessState.GONE)


ALIVE = Probe(p100=ProcessState.ALIVE)


def held_by(other: Holder, generation=3, renewed_ms=10_000) -> Lease:
    return Lease(generation, other, 0, renewed_ms, renewed_ms + EXPIRY)


# ---- a start ---------------------------------------------------------------------------------


def test_no_lease_is_taken_as_the_first_generation():
    assert judge(None, 0, ME, 0, ALIVE) == Take(1, None, "")


def test_a_lease_file_gone_between_listing_and_reading_is_followed_by_the_next_generation():
    assert judge(None, 4, ME, 0, ALIVE) == Take(5, None, "")


def test_a_live_lease_of_a_live_process_refuses_the_start():
    lease = held_by(holder("other", rest="http://h1:8081"))
    assert judge(lease, 3, ME, 20_000, ALIVE) == Refuse(lease)
    assert judge(lease, 3, ME, 39_999, ALIVE) == Refuse(lease)  # 1 ms before its expiry


def test_an_expired_lease_is_taken_over_even_if_its_process_lives():
    lease = held_by(holder("other"))
    decision = judge(lease, 3, ME, 40_000, ALIVE)
    assert decision == Take(4, lease, "it was last renewed 30 s ago and has expired")


def test_a_live_lease_of_a_dead_process_on_this_machine_is_taken_at_once():
    lease = held_by(holder("other", pid=100))
    probe = Probe()  # pid 100 is gone
    decision = judge(lease, 3, ME, 10_001, probe)
    assert decision == Take(4, lease, "its process 100 on this machine is gone")
    assert probe.asked == [(100, "555")]


def test_a_live_lease_whose_pid_now_runs_another_process_is_taken_at_once():
    lease = held_by(holder("other", pid=100))
    decision = judge(lease, 3, ME, 10_001, Probe(p100=ProcessState.REUSED))
    assert isinstance(decision, Take) and decision.generation == 4
    assert "the pid runs another process" in decision.why


def test_a_pid_of_another_machine_is_never_probed_only_the_expiry_counts():
    lease = held_by(holder("other", host="h2", machine="boot-2 pid:[1]", pid=100))
    probe = Probe()  # would say gone
    assert judge(lease, 3, ME, 20_000, probe) == Refuse(lease)
    assert probe.asked == []
    assert isinstance(judge(lease, 3, ME, 40_000, probe), Take)


def test_the_same_host_name_in_another_pid_namespace_is_another_machine():
    lease = held_by(holder("other", host="h1", machine="boot-1 pid:[2]"))
    assert judge(lease, 3, ME, 20_000, Probe()) == Refuse(lease)


def test_without_machine_ids_the_host_name_decides_whether_pids_compare():
    me = holder("me", machine=None)
    same_host = held_by(holder("other", machine=None))
    other_host = held_by(holder("other", host="h2", machine=None))
    assert isinstance(judge(same_host, 3, me, 20_000, Probe()), Take)
    assert judge(other_host, 3, me, 20_000, Probe()) == Refuse(other_host)


def test_this_runs_own_lease_is_taken_again():
    own = held_by(ME)
    assert judge(own, 3, ME, 20_000, ALIVE) == Take(4, own, "it is this run's own")


def test_the_refusal_names_the_running_job_and_what_to_do():
    lease = held_by(holder("4f1c", rest="http://h1:8081", pid=100), renewed_ms=10_000)
    line = refusal_message(lease, "file:///chk/word-count", 12_000)
    assert line == (
        "job 'word-count' is already running on checkpoint folder file:///chk/word-count: "
        "job 4f1c on host h1 (pid 100), REST http://h1:8081, lease renewed 2 s ago. Cancel it "
        "(`barrierflow cancel 4f1c`) or wait for it to end; if that run died, its lease "
        "expires 30 s after its last renewal (in 28 s)"
    )
    assert "\n" not in line


def test_a_lease_round_trips_through_its_file_and_refuses_another_generations_name():
    lease = first_lease(7, holder("4f1c", rest="http://h1:8081"), 1_000, EXPIRY)
    assert Lease.decode(lease.encode(), 7) == lease
    with pytest.raises(ValueError, match="generation 7"):
        Lease.decode(lease.encode(), 8)
    with pytest.raises(ValueError, match="not a lease"):
        Lease.decode(b"{}", 1)
    with pytest.raises(ValueError, match="not a lease"):
        Lease.decode(b"\x00garbage", 1)


# ---- a running holder ----------------------------------------------------------------------


def test_a_holder_keeps_its_lease_while_it_is_the_newest_and_names_it():
    mine = first_lease(3, ME, 0, EXPIRY)
    assert check_renewal(mine, 3, mine) is None
    renewed = mine.renewed(5_000, EXPIRY, "http://h1:8081")
    assert (renewed.renewed_ms, renewed.expires_ms, renewed.acquired_ms) == (5_000, 35_000, 0)
    assert renewed.holder.rest_url == "http://h1:8081"
    assert check_renewal(renewed, 3, mine) is None  # what is on storage is the older write


def test_a_newer_generation_means_the_lease_was_taken_over():
    mine = first_lease(3, ME, 0, EXPIRY)
    taker = first_lease(4, holder("other", rest="http://h2:8081"), 40_000, EXPIRY)
    lost = check_renewal(mine, 4, taker)
    assert lost == Lost("taken over by job other on host h1 (pid 100), REST http://h2:8081")
    assert check_renewal(mine, 4, None) == Lost("a newer lease, generation 4, exists")


def test_a_missing_or_overwritten_own_file_is_a_lost_lease():
    mine = first_lease(3, ME, 0, EXPIRY)
    assert "its file is gone" in check_renewal(mine, 0, None).why
    assert "its file is gone" in check_renewal(mine, 3, None).why
    overwritten = first_lease(3, holder("other"), 0, EXPIRY)  # an object store's last writer
    assert check_renewal(mine, 3, overwritten).why.startswith("taken over by job other")


def test_a_failed_renewal_goes_on_until_the_lease_expires():
    mine = first_lease(3, ME, 0, EXPIRY)
    assert renewal_failed(mine, 5_000, "503 Slow Down") is None
    assert renewal_failed(mine, 29_999, "503 Slow Down") is None
    lost = renewal_failed(mine, 30_000, "503 Slow Down")
    assert lost is not None and "not renewed before it expired: 503 Slow Down" in lost.why


def test_the_lost_line_says_why_the_run_stops():
    line = lost_message("s3://b/chk/wc", Lost("taken over by job other on host h2 (pid 1)"))
    assert line == (
        "lost the lease of checkpoint folder s3://b/chk/wc (taken over by job other on host h2 "
        "(pid 1)); stopping so that two runs never write the same checkpoints"
    )
