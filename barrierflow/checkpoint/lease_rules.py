"""Who may write a job's checkpoint folder: the lease's decisions, from what its files say.

One run of a job at a time writes the job's checkpoint folder (`checkpoint/lease.py` keeps the
files). The lease is a numbered file, `_lease-<generation>`; the highest generation is the
current lease. What a starting run and a running one decide from it is here, pure: the
records read, the time, and what a process probe says about a holder on this machine come in;
a decision comes out. Nothing here reads a file, a clock or a process.

A start (`judge`) takes the folder when no lease is there, when the current lease expired
(its holder did not renew it within its expiry), or when its holder ran on this machine and
its process is gone (or its pid now belongs to another process): a rerun right after a
killed driver starts at once. Otherwise the start is refused, naming the holder.

A running holder (`check_renewal`) keeps the lease while its generation is still the highest
and still names it; anything else means another run took the folder over (ours had expired):
the holder has lost it and must stop touching the folder. A holder that cannot renew (the
storage errs) goes on until its own lease expires, then gives up (`renewal_failed`), since
from then on another run may take over.

>>> me = Holder("a1", "r1", "wc", "h", 10, "m", "s", None)
>>> other = Holder("b2", "r2", "wc", "h2", 20, "m2", "s2", "http://h2:8081")
>>> held = Lease(3, other, acquired_ms=0, renewed_ms=1_000, expires_ms=31_000)
>>> judge(held, 3, me, now_ms=5_000, probe=lambda pid, start: ProcessState.ALIVE) == Refuse(held)
True
>>> judge(held, 3, me, now_ms=31_000, probe=lambda pid, start: ProcessState.ALIVE).generation
4
"""

from __future__ import annotations

import enum
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

__all__ = [
    "Holder",
    "Lease",
    "Lost",
    "ProcessState",
    "Refuse",
    "Take",
    "check_renewal",
    "judge",
    "renewal_failed",
]

FORMAT_VERSION = 1


@dataclass(frozen=True)
class Holder:
    """A run of a job, as its lease names it."""

    job_id: str
    """The JobMaster's id: what `barrierflow cancel` takes; the lease's owner."""
    run_id: str
    job_name: str
    host: str
    pid: int
    """The driver process."""
    machine: str | None
    """The kernel's boot id and the pid namespace (None where they cannot be read): a pid
    means something only on the same machine and namespace."""
    process_start: str | None
    """When the driver process started (`/proc/<pid>/stat`), so a reused pid is told apart."""
    rest_url: str | None
    """The run's REST endpoint, once it is up (None: not yet, or none)."""

    def comparable_with(self, other: Holder) -> bool:
        """Whether `other`'s pid can be probed from here: same kernel and pid namespace
        (or, where neither side can say, the same host name)."""
        if self.machine is not None or other.machine is not None:
            return self.machine == other.machine
        return self.host == other.host

    def describe(self) -> str:
        """`job 4f1c... on host h (pid 123), REST http://h:8081`."""
        rest = f"REST {self.rest_url}" if self.rest_url else "no REST endpoint yet"
        return f"job {self.job_id} on host {self.host} (pid {self.pid}), {rest}"


@dataclass(frozen=True)
class Lease:
    """One lease file's content; `generation` is the number in its name."""

    generation: int
    holder: Holder
    acquired_ms: int
    renewed_ms: int
    expires_ms: int

    def encode(self) -> bytes:
        return json.dumps({"version": FORMAT_VERSION, **asdict(self)}, indent=1).encode()

    @classmethod
    def decode(cls, data: bytes, generation: int) -> Lease:
        """The lease in `data`, read from the file of `generation`; ValueError if it is not
        one (another version, damaged, or a file of another generation's content).

        >>> lease = Lease(2, Holder("a", "r", "j", "h", 1, None, None, None), 5, 6, 7)
        >>> Lease.decode(lease.encode(), 2) == lease
        True
        """
        try:
            document = json.loads(data)
            if document.pop("version") != FORMAT_VERSION:
                raise ValueError(f"format version {document.get('version')}")
            holder = Holder(**document.pop("holder"))
            lease = cls(holder=holder, **document)
        except (KeyError, TypeError, AttributeError, json.JSONDecodeError) as error:
            raise ValueError(f"not a lease: {error}") from None
        if lease.generation != generation:
            raise ValueError(f"it says generation {lease.generation}, its name {generation}")
        return lease

    def renewed(self, now_ms: int, expiry_ms: int, rest_url: str | None) -> Lease:
        """This lease renewed at `now_ms`, naming `rest_url`."""
        holder = replace(self.holder, rest_url=rest_url)
        return replace(self, holder=holder, renewed_ms=now_ms, expires_ms=now_ms + expiry_ms)


def first_lease(generation: int, holder: Holder, now_ms: int, expiry_ms: int) -> Lease:
    return Lease(generation, holder, now_ms, now_ms, now_ms + expiry_ms)


class ProcessState(enum.Enum):
    """What a probe says about a pid of this machine."""

    ALIVE = "alive"
    GONE = "gone"
    REUSED = "reused"
    """The pid runs another process (it started at another time)."""


ProcessProbe = Callable[[int, "str | None"], ProcessState]
"""(pid, its recorded start) -> what runs under that pid now."""


# ---- a start ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Take:
    """The folder is free: write the lease of `generation`."""

    generation: int
    replaces: Lease | None
    """The stale lease taken over (None: there was none)."""
    why: str
    """Why `replaces` is stale, for the log line ("" when there was none)."""


@dataclass(frozen=True)
class Refuse:
    """Another run holds the folder: this start must not touch it."""

    lease: Lease


def judge(
    current: Lease | None,
    highest_generation: int,
    me: Holder,
    now_ms: int,
    probe: ProcessProbe,
) -> Take | Refuse:
    """What a start by `me` does, the current lease being `current` (None: no lease file) of
    `highest_generation` (0: none ever seen)."""
    if current is None:
        return Take(highest_generation + 1, None, "")
    if current.holder.job_id == me.job_id:  # our own, left by an earlier try of this start
        return Take(highest_generation + 1, current, "it is this run's own")
    if me.comparable_with(current.holder):
        state = probe(current.holder.pid, current.holder.process_start)
        if state is ProcessState.GONE:
            return Take(highest_generation + 1, current, f"its process {current.holder.pid} "
                        "on this machine is gone")  # fmt: skip
        if state is ProcessState.REUSED:
            return Take(highest_generation + 1, current, f"its process {current.holder.pid} "
                        "on this machine is gone (the pid runs another process)")  # fmt: skip
    if now_ms >= current.expires_ms:
        late_s = (now_ms - current.renewed_ms) / 1000
        return Take(highest_generation + 1, current, f"it was last renewed {late_s:.0f} s ago "
                    "and has expired")  # fmt: skip
    return Refuse(current)


def refusal_message(lease: Lease, folder: str, now_ms: int) -> str:
    """One line: who holds the folder and what to do."""
    holder = lease.holder
    ago_s = max(0, now_ms - lease.renewed_ms) / 1000
    left_s = max(0, lease.expires_ms - now_ms) / 1000
    expiry_s = (lease.expires_ms - lease.renewed_ms) / 1000
    return (
        f"job '{holder.job_name}' is already running on checkpoint folder {folder}: "
        f"{holder.describe()}, lease renewed {ago_s:.0f} s ago. Cancel it "
        f"(`barrierflow cancel {holder.job_id}`) or wait for it to end; if that run died, "
        f"its lease expires {expiry_s:.0f} s after its last renewal (in {left_s:.0f} s)"
    )


# ---- a running holder ---------------------------------------------------------------------


@dataclass(frozen=True)
class Lost:
    """Another run took the folder over, or this run can no longer show it holds it."""

    why: str


def check_renewal(mine: Lease, highest_generation: int, current: Lease | None) -> Lost | None:
    """Whether `mine` still holds the folder, the highest generation on storage being
    `highest_generation` and its lease `current` (None: unreadable or missing)."""
    if highest_generation > mine.generation:
        if current is not None:
            return Lost(f"taken over by {current.holder.describe()}")
        return Lost(f"a newer lease, generation {highest_generation}, exists")
    if highest_generation < mine.generation or current is None:
        return Lost("its file is gone: deleted, or taken over and released")
    if current.holder.job_id != mine.holder.job_id:
        return Lost(f"taken over by {current.holder.describe()}")
    return None


def renewal_failed(mine: Lease, now_ms: int, error: str) -> Lost | None:
    """A renewal could not read or write the lease: go on while it has not expired."""
    if now_ms < mine.expires_ms:
        return None
    return Lost(f"not renewed before it expired: {error}; another run may take the folder over")


def lost_message(folder: str, lost: Lost) -> str:
    """One line: the lease is lost, and the run stops."""
    return (
        f"lost the lease of checkpoint folder {folder} ({lost.why}); stopping so that two "
        "runs never write the same checkpoints"
    )
