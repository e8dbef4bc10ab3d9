"""Starting the job's REST endpoint and registering it, so commands find the job; a job runs on
without either if its port is taken or its registry folder cannot be written."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable

from barrierflow._clock import SYSTEM_CLOCK
from barrierflow.cluster.jobmaster.views import JobView
from barrierflow.cluster.metrics.view import MetricsSnapshot
from barrierflow.cluster.registry import JobEntry, JobRegistry
from barrierflow.cluster.rest.job_actions import JobActions
from barrierflow.cluster.rest.server import JobControl, RestServer

__all__ = ["STOP_RESULT_LINGER_S", "JobEndpoint", "start_rest_endpoint"]

log = logging.getLogger(__name__)

STOP_RESULT_LINGER_S = 10.0
"""How long the endpoint of a stopped job waits for the stop's result to be read."""


class JobEndpoint:
    """The job's REST server and its registry entry; `close` removes both. Any thread."""

    def __init__(self, server: RestServer, registry: JobRegistry | None, job_id: str) -> None:
        self.server = server
        self._registry = registry
        self._job_id = job_id

    @property
    def url(self) -> str:
        return self.server.url

    def close(self) -> None:
        """Unregister at once (the job is no longer running); serve until the result of a
        stop asked for here was read (at most STOP_RESULT_LINGER_S), then stop serving."""
        if self._registry is not None:
            try:
                self._registry.unregister(self._job_id)
            except OSError as error:
                log.warning("cannot remove job %s from the registry: %s", self._job_id, error)
            self._registry = None
        control = self.server.control
        if control is not None and not control.wait_for_stop_results(STOP_RESULT_LINGER_S):
            log.info(
                "job %s: nobody read the stop's result; closing the REST endpoint", self._job_id
            )
        self.server.close()


def start_rest_endpoint(
    job_name: str,
    job_id: str,
    host: str,
    port: int | None,
    get_view: Callable[[], JobView | None],
    actions: JobActions | None = None,
    token: str | None = None,
    registry: JobRegistry | None = None,
    get_metrics: Callable[[], MetricsSnapshot | None] | None = None,
) -> JobEndpoint | None:
    """The endpoint serving `get_view()` on host:port, taking `actions` with `token`, and
    registered in `registry` (default: the user's); None when off (port None) or the port
    cannot be bound (logged: the job itself does not depend on it). Without `actions` and
    `token` the endpoint is read-only and not registered. `get_metrics` feeds `/metrics` and
    the metrics routes."""
    if port is None:
        return None
    control = JobControl(actions, token) if actions is not None and token else None
    try:
        server = RestServer(host, port, get_view, control, get_metrics)
    except OSError as error:
        log.warning(
            "job '%s' runs without its REST endpoint: cannot listen on %s:%d: %s",
            job_name,
            host,
            port,
            error,
        )
        return None
    log.info("job '%s' (%s): REST endpoint at %s/jobs/%s", job_name, job_id, server.url, job_id)
    if control is None or token is None:
        return JobEndpoint(server, None, job_id)
    registry = registry if registry is not None else JobRegistry.default()
    view = get_view()
    entry = JobEntry(
        job_id=job_id,
        name=job_name,
        rest_url=server.url,
        token=token,
        pid=os.getpid(),
        host=registry.host,
        start_ms=view.start_ms if view is not None else SYSTEM_CLOCK.epoch_millis(),
    )
    try:
        path = registry.register(entry)
    except OSError as error:
        log.warning(
            "job '%s' is not in the job registry (`barrierflow list` will not show it): "
            "cannot write %s: %s",
            job_name,
            registry.folder,
            error,
        )
        return JobEndpoint(server, None, job_id)
    log.debug("job '%s' registered in %s", job_name, path)
    return JobEndpoint(server, registry, job_id)
