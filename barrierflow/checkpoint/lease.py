"""A run's lease on its job's checkpoint folder: one run of a job at a time writes it.

Two runs of one job on one folder would collide: checkpoint ids and `_metadata`, one run's
retention deleting the other's folders, a sink's sweep at restore rolling back or deleting
what the other run prepared. So a run takes the folder's lease before it touches anything
there (JobStart.prepare), renews it while it lives, and deletes it when it ends; a second
start finds the lease and is refused, naming the run that holds it.

The lease is a small JSON file in the job's folder, `<job dir>/_lease-<generation>`
(`lease_rules.Lease`: job id, run id, host, pid and the process's start time, REST URL,
renewal and expiry times); the highest generation is the current lease. Taking the folder
writes the next generation, never over an older one, so a holder whose lease was taken
over never overwrites its successor's: at its next renewal it sees a newer generation and
stops. What counts as free, taken or lost is decided in `lease_rules.py`.

How the next generation is created, so that of two simultaneous starts only one wins:

- on a local or network-mounted disk (`file://`, NFS): written under a temporary name,
  then hard-linked to its final name, which fails if that name exists (on NFS too, where
  `O_EXCL` was not always atomic); a lost reply is told apart by the link count;
- on an object store (S3, GCS, Azure) and HDFS, which pyarrow offers no conditional
  create for: uploaded unless it exists, then read back after `SETTLE_S`; the start
  whose content is there wins, the other is refused. Two starts win together only if one
  uploads more than `SETTLE_S` after its own check found the name free (a store stalling
  for that long between two requests): a limit of this design, documented in
  docs/cluster.md.

The expiry is judged by the wall clock of whoever reads the lease against the holder's
recorded expiry: the hosts' clocks must agree within a small part of `EXPIRY_MS` (NTP).
Savepoint folders written elsewhere take no lease; readers (`state_processor`,
`barrierflow checkpoints`) never take it.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from barrierflow import _fs
from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.checkpoint.lease_rules import (
    Holder,
    Lease,
    Lost,
    ProcessProbe,
    ProcessState,
    Refuse,
    check_renewal,
    first_lease,
    judge,
    lost_message,
    refusal_message,
    renewal_failed,
)
from barrierflow.errors import CheckpointStorageError, JobAlreadyRunningError, LeaseLostError

__all__ = [
    "EXPIRY_MS",
    "RENEW_INTERVAL_MS",
    "CheckpointLease",
    "probe_process",
    "this_process",
]

log = logging.getLogger(__name__)

RENEW_INTERVAL_MS = 5_000
"""How often a running job renews its lease: a few small writes a minute."""
EXPIRY_MS = 30_000
"""How long a lease holds after its last renewal. Six renewals may fail (a slow store, a
busy driver) before anyone may take over; a rerun on another host after a crashed driver
waits at most this long (on the same host a dead driver's lease is taken at once)."""
SETTLE_S = 1.0
"""How long a start on an object store waits before reading its new lease back."""
_ATTEMPTS = 5
"""How often a start judges again after another start won a generation it wanted."""
_LEASE = re.compile(r"^_lease-(\d+)$")
_NO_LINK = frozenset({errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS})
"""What `link` raises on a filesystem without hard links."""


def lease_name(generation: int) -> str:
    return f"_lease-{generation}"


class CheckpointLease:
    """The lease of one run on one job folder. One thread at a time (the JobMaster's)."""

    def __init__(
        self,
        job_dir: _fs.Location,
        holder: Holder,
        clock: Clock = SYSTEM_CLOCK,
        *,
        expiry_ms: int = EXPIRY_MS,
        probe: ProcessProbe | None = None,
        settle_s: float = SETTLE_S,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.job_dir = job_dir
        self.holder = holder
        self.expiry_ms = expiry_ms
        self._clock = clock
        self._probe = probe or probe_process
        self._settle_s = settle_s
        self._sleep = sleep
        self.mine: Lease | None = None
        """The lease as this run last wrote it; None when not held (before, lost, released)."""

    @property
    def held(self) -> bool:
        """Whether this run holds the folder (and may touch its checkpoints and sweep)."""
        return self.mine is not None

    # ---- a start -------------------------------------------------------------------------

    def acquire(self) -> None:
        """Take the folder, or raise JobAlreadyRunningError naming the run holding it
        (CheckpointStorageError when the folder cannot be read or written)."""
        try:
            _fs.make_dirs(self.job_dir)
        except OSError as error:
            raise CheckpointStorageError(
                f"checkpoint folder {self.job_dir} is not writable: {error}"
            ) from error
        for _ in range(_ATTEMPTS):
            highest, current = self._read_for_start()
            now = self._clock.epoch_millis()
            decision = judge(current, highest, self.holder, now, self._probe)
            if isinstance(decision, Refuse):
                raise JobAlreadyRunningError(refusal_message(decision.lease, self.job_dir.uri, now))
            lease = first_lease(decision.generation, self.holder, now, self.expiry_ms)
            if not self._create(lease):
                continue  # another start took that generation first: judge again
            self.mine = lease
            if decision.replaces is not None:
                log.warning(
                    "job '%s' takes over checkpoint folder %s from %s: %s",
                    self.holder.job_name,
                    self.job_dir,
                    decision.replaces.holder.describe(),
                    decision.why,
                )
            self._prune(lease.generation)
            return
        raise CheckpointStorageError(
            f"cannot take the lease of checkpoint folder {self.job_dir}: other starts kept "
            f"taking it ({_ATTEMPTS} tries)"
        )

    def _read_for_start(self) -> tuple[int, Lease | None]:
        try:
            return self._read_current()
        except ValueError as error:
            raise CheckpointStorageError(
                f"cannot read the lease in checkpoint folder {self.job_dir}: {error}; if no "
                "run of this job is running, delete that file"
            ) from None
        except OSError as error:
            raise CheckpointStorageError(
                f"cannot read the lease in checkpoint folder {self.job_dir}: {error}"
            ) from error

    def _create(self, lease: Lease) -> bool:
        """Write `lease` under its generation's name unless that name exists; True if this
        run's lease is the one there."""
        target = self._file(lease.generation)
        try:
            if _fs.is_local(target):
                return _link_exclusive(Path(target.path), lease.encode())
            if _fs.exists(target):
                return False
            _fs.write_bytes(target, lease.encode())
            self._sleep(self._settle_s)
            highest, current = self._read_current()
        except ValueError:
            return False  # another start's content: judge again
        except OSError as error:
            raise CheckpointStorageError(
                f"checkpoint folder {self.job_dir} is not writable: cannot write {target}: {error}"
            ) from error
        return (
            highest == lease.generation
            and current is not None
            and current.holder.job_id == self.holder.job_id
        )

    def _prune(self, generation: int) -> None:
        """Delete the older generations (stale: this run just took over from them)."""
        try:
            for name in _fs.list_dir(self.job_dir):
                match = _LEASE.match(name)
                if match and int(match.group(1)) < generation:
                    _fs.delete_file(self.job_dir.child(name))
        except OSError as error:  # harmless: the highest generation is the lease
            log.info("could not delete old leases in %s: %s", self.job_dir, error)

    # ---- a running holder --------------------------------------------------------------

    def renew(self, rest_url: str | None) -> None:
        """Check the lease is still this run's and push its expiry on, naming `rest_url` (the
        run's REST endpoint; None: none yet). Raises LeaseLostError when another run took it
        over, or when it could not be renewed before it expired; a failed renewal before
        that is logged and retried at the next call."""
        mine = self.mine
        if mine is None:
            raise LeaseLostError(f"holds no lease of checkpoint folder {self.job_dir}")
        now = self._clock.epoch_millis()
        try:
            highest, current = self._read_current()
        except ValueError as error:  # a file that is no lease is the newest: not ours
            self._lose(Lost(str(error)))
        except OSError as error:
            self._renewal_failed(mine, now, error)
            return
        lost = check_renewal(mine, highest, current)
        if lost is not None:
            self._lose(lost)
        renewed = mine.renewed(now, self.expiry_ms, rest_url)
        try:
            _fs.write_atomic(self._file(mine.generation), renewed.encode())
        except OSError as error:
            self._renewal_failed(mine, now, error)
            return
        self.mine = renewed

    def _renewal_failed(self, mine: Lease, now: int, error: OSError) -> None:
        lost = renewal_failed(mine, now, str(error))
        if lost is not None:
            self._lose(lost)
        log.warning(
            "job '%s' could not renew its lease in %s (retrying; it expires in %d s): %s",
            self.holder.job_name,
            self.job_dir,
            (mine.expires_ms - now) // 1000,
            error,
        )

    def _lose(self, lost: Lost) -> NoReturn:
        self.mine = None
        raise LeaseLostError(lost_message(self.job_dir.uri, lost))

    def release(self) -> None:
        """Delete the lease if this run still holds it; never raises (a lease left behind
        expires, or is taken at once by a rerun on this host)."""
        mine, self.mine = self.mine, None
        if mine is None:
            return
        target = self._file(mine.generation)
        try:
            found = Lease.decode(_fs.read_bytes(target), mine.generation)
            if found.holder.job_id == mine.holder.job_id:
                _fs.delete_file(target)
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as error:
            log.warning(
                "job '%s' could not release its lease %s (it expires %d s after its last "
                "renewal): %s",
                self.holder.job_name,
                target,
                self.expiry_ms // 1000,
                error,
            )

    # ---- reading ---------------------------------------------------------------------------

    def _file(self, generation: int) -> _fs.Location:
        return self.job_dir.child(lease_name(generation))

    def _read_current(self) -> tuple[int, Lease | None]:
        """(the highest generation, its lease); (0, None) without any, (n, None) if its
        file went between listing and reading. ValueError: it is not a lease."""
        return read_current(self.job_dir)


def read_current(job_dir: _fs.Location) -> tuple[int, Lease | None]:
    """The current lease of `job_dir` and its generation (see CheckpointLease)."""
    generations = [int(m.group(1)) for name in _fs.list_dir(job_dir) if (m := _LEASE.match(name))]
    if not generations:
        return 0, None
    highest = max(generations)
    target = job_dir.child(lease_name(highest))
    try:
        data = _fs.read_bytes(target)
    except FileNotFoundError:
        return highest, None
    try:
        return highest, Lease.decode(data, highest)
    except ValueError as error:
        raise ValueError(f"{target} is not a lease: {error}") from None


def _link_exclusive(path: Path, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists: written whole under a temporary name,
    then hard-linked into place (atomic, also on NFS). False if `path` exists."""
    temporary = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    with open(temporary, "xb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    try:
        try:
            os.link(temporary, path)
        except FileExistsError:
            return False
        except OSError as error:
            if temporary.stat().st_nlink == 2:  # NFS: linked, but the reply was lost
                return True
            if error.errno not in _NO_LINK:
                raise
            return _create_exclusive(path, data)  # no hard links here: O_EXCL
        _sync_folder(path.parent)
        return True
    finally:
        temporary.unlink(missing_ok=True)


def _create_exclusive(path: Path, data: bytes) -> bool:
    try:
        with open(path, "xb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
    except FileExistsError:
        return False
    _sync_folder(path.parent)
    return True


def _sync_folder(folder: Path) -> None:
    """Make a new name in `folder` durable (where folders can be opened and synced)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    except OSError:
        pass
    finally:
        os.close(descriptor)


# ---- this process ----------------------------------------------------------------------------


def this_process(job_id: str, run_id: str, job_name: str, rest_url: str | None = None) -> Holder:
    """A Holder for a run in this process."""
    pid = os.getpid()
    stat = _proc_stat(pid)
    return Holder(
        job_id=job_id,
        run_id=run_id,
        job_name=job_name,
        host=socket.gethostname(),
        pid=pid,
        machine=machine_id(),
        process_start=stat[1] if stat is not None else None,
        rest_url=rest_url,
    )


def machine_id() -> str | None:
    """The kernel's boot id and this process's pid namespace: pids are comparable between
    two processes exactly when these agree (None without /proc)."""
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
        namespace = os.readlink("/proc/self/ns/pid")
    except OSError:
        return None
    return f"{boot} {namespace}"


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of `pid` from /proc; None without it."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()  # after "pid (comm) "
    return fields[0], fields[19]  # fields 3 and 22 of proc(5)


def probe_process(pid: int, start: str | None) -> ProcessState:
    """What runs under `pid` on this machine: the process that started at `start` (None:
    not recorded), another one, or nothing (a zombie counts as gone)."""
    stat = _proc_stat(pid)
    if stat is not None:
        state, started = stat
        if state in ("Z", "X"):
            return ProcessState.GONE
        if start is not None and started != start:
            return ProcessState.REUSED
        return ProcessState.ALIVE
    if os.name == "nt":  # no /proc, and os.kill would end the process: say nothing
        return ProcessState.ALIVE
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return ProcessState.GONE
    except PermissionError:  # it exists, under another user
        return ProcessState.ALIVE
    return ProcessState.ALIVE
