"""Reading a file an agent could have put in place of the one a harness reads.

An agent runs as the person, so it can replace a CLI's transcript or session file with a FIFO
(whose open blocks until a writer comes: the run's whole event loop with it), a link to
`/dev/zero`, or a file that never ends. So such a file is opened without blocking, read only
if it is a regular file, and at most `limit` bytes from `offset`.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def read_regular(path: Path | str, limit: int, *, offset: int = 0, follow: bool = True) -> bytes | None:
    """At most `limit` bytes of the regular file `path` from `offset` (`follow`: through a symbolic
    link); None if it is anything else or can't be read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        descriptor = os.open(path, flags)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return None
        return os.pread(descriptor, limit, offset)
    except OSError:
        return None
    finally:
        os.close(descriptor)
