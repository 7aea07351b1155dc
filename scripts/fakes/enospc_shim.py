"""Run the hardware job as if the disk were full whenever its manifest records the events named
in ``FAKE_ENOSPC_ON`` (comma-separated: ``step-start``, ``step-end``, ``finish``): inside those
``nki_kernels.hw.manifest.Manifest`` methods, and only in the thread running them, a file opened
for writing is created and then ``OSError(ENOSPC)`` is raised, as a full disk does.  Used by
scripts/fakes/venv/bin/python: ``enospc_shim.py -m nki_kernels.hw.run ARGS...``."""

import builtins
import errno
import functools
import os
import runpy
import sys
import threading

_open = builtins.open
_active = threading.local()


def _full_disk_open(file, mode="r", *args, **kwargs):
    if getattr(_active, "on", False) and any(c in mode for c in "wax+"):
        _open(file, mode, *args, **kwargs).close()  # the file appears, its content cannot
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
    return _open(file, mode, *args, **kwargs)


def _full_during(method):
    @functools.wraps(method)
    def wrapped(*args, **kwargs):
        _active.on = True
        try:
            return method(*args, **kwargs)
        finally:
            _active.on = False

    return wrapped


if __name__ == "__main__":
    from nki_kernels.hw import manifest

    for event in os.environ.get("FAKE_ENOSPC_ON", "").split(","):
        name = event.strip().replace("-", "_")
        if name:
            setattr(manifest.Manifest, name, _full_during(getattr(manifest.Manifest, name)))
    builtins.open = _full_disk_open
    if sys.argv[1:2] != ["-m"] or len(sys.argv) < 3:
        sys.exit("enospc_shim.py: usage: enospc_shim.py -m MODULE ARGS...")
    module = sys.argv[2]
    sys.argv = [module, *sys.argv[3:]]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
