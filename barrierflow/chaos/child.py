"""One driver of a `barrierflow chaos` run split across drivers (the failure kind driver).

`python -m barrierflow.chaos.child SPEC`: SPEC is the file where chaos/drivers.py's `DriverRuns`
pickled a `DriverSpec`; this process runs the job file with its share of the plan
(`run_driver`) and writes its events, one JSON object a line, to the pipe the spec
names, until its run ends or the parent kills it.
"""

from __future__ import annotations

import json
import pickle
import sys
import threading
from pathlib import Path
from typing import Any

from barrierflow.chaos.drivers import DriverSpec, run_driver


def main(argv: list[str]) -> None:
    spec: DriverSpec = pickle.loads(Path(argv[0]).read_bytes())
    lock = threading.Lock()
    pipe = open(spec.events_fd, "w", encoding="utf-8", buffering=1)  # noqa: SIM115

    def send(**event: Any) -> None:
        with lock:
            pipe.write(json.dumps(event) + "\n")
            pipe.flush()

    run_driver(spec, send)
    pipe.close()


if __name__ == "__main__":
    main(sys.argv[1:])
