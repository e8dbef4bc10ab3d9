"""Settings of the whole test session."""

from __future__ import annotations

import os
import tempfile

# Jobs started by tests register in a folder of their own, never in the user's registry of
# running jobs (tests that look at a registry point BARRIERFLOW_REGISTRY_DIR elsewhere).
os.environ["BARRIERFLOW_REGISTRY_DIR"] = tempfile.mkdtemp(prefix="barrierflow-test-registry-")

from s3_server import s3_server  # noqa: F401  (the session fixture, for every test folder)
