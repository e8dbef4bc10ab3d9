"""Ships the user's own modules with the job, so Spark's Python workers need not import them.

cloudpickle pickles a function or class by reference when its module is
importable on the driver, and a Spark worker then fails with
`ModuleNotFoundError` for modules that live next to the job file (or in a test
folder) rather than in an installed package. Modules that are neither part of
the Python installation nor of an installed distribution are registered to be
pickled by value instead, the way `__main__` already is.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
from types import ModuleType

from pyspark import cloudpickle

_INSTALLED_ROOTS = tuple(
    os.path.realpath(path)
    for path in {
        sysconfig.get_paths()["stdlib"],
        sysconfig.get_paths()["platstdlib"],
        sysconfig.get_paths()["purelib"],
        sysconfig.get_paths()["platlib"],
        sys.prefix,
        sys.base_prefix,
    }
)
_FRAMEWORK = ("barrierflow", "pyspark", "py4j", "_pytest", "pytest", "pluggy")


def is_user_module(module: ModuleType, installed: tuple[str, ...] | None = None) -> bool:
    """A module of the user's own code: a plain file outside the installation and framework
    (`installed`: the folders that hold installed code, if the caller has them already)."""
    name = getattr(module, "__name__", "")
    path = getattr(module, "__file__", None)
    if not path or name == "__main__" or name.split(".")[0] in _FRAMEWORK:
        return False
    if installed is None:
        installed = _INSTALLED_ROOTS + _site_folders()
    return not _real_path(path).startswith(installed)


@functools.cache
def _real_path(path: str) -> str:
    """`os.path.realpath`, remembered: each job asks about the same module files again (a
    thousand of them in a test session, seconds of system calls on a busy machine)."""
    return os.path.realpath(path)


def _site_folders() -> tuple[str, ...]:
    """Every site-packages (or dist-packages) folder on the path, also those another
    environment's `.pth` file added: what lies there is an installed distribution."""
    return tuple(
        _real_path(entry) + os.sep
        for entry in sys.path
        if os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages")
    )


def register_user_modules_by_value() -> list[str]:
    """Make cloudpickle carry the code of every user module; returns their names."""
    registered = []
    installed = _INSTALLED_ROOTS + _site_folders()
    for name, module in list(sys.modules.items()):
        if isinstance(module, ModuleType) and is_user_module(module, installed):
            cloudpickle.register_pickle_by_value(module)
            registered.append(name)
    return registered
