"""Run a script as if the disk were full: files opened for writing are created, then
``OSError(ENOSPC)``.  Used by scripts/fakes/venv/bin/python for ``FAKE_ENOSPC_ON``."""
import builtins
import errno
import os
import runpy
import sys

_open = builtins.open


def _full_disk_open(file, mode="r", *args, **kwargs):
    if any(c in mode for c in "wax+"):
        _open(file, mode, *args, **kwargs).close()      # the file appears, its content cannot
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(file))
    return _open(file, mode, *args, **kwargs)


if __name__ == "__main__":
    script = sys.argv[1]
    sys.argv = sys.argv[1:]
    builtins.open = _full_disk_open
    runpy.run_path(script, run_name="__main__")
