"""Starting the job's REST endpoint: a job runs on without it if its port is taken."""

from __future__ import annotations

import logging
from collections.abc import Callable

from barrierflow.cluster.rest import JobView, RestServer

log = logging.getLogger(__name__)


def start_rest_endpoint(
    job_name: str, job_id: str, host: str, port: int | None, get_view: Callable[[], JobView | None]
) -> RestServer | None:
    """The endpoint serving `get_view()` on host:port; None when off (port None) or the
    port cannot be bound (logged: the job itself does not depend on it)."""
    if port is None:
        return None
    try:
        server = RestServer(host, port, get_view)
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
    return server
