"""`barrierflow.configuration`: where the porting rule puts `pyflink.common.configuration`
(`from pyflink.common.configuration import Configuration` becomes `from
barrierflow.configuration import Configuration`). The same class as `barrierflow.Configuration`;
a package, not a module, to keep barrierflow's top level at a dozen modules.
"""

from barrierflow.api.configuration import Configuration

__all__ = ["Configuration"]
