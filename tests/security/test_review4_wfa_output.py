"""Review 4: wfa wrote only part of its answer when its standard output was non-blocking.

wfa prints the run's answer with `posix.write` and ends by `posix._exit` (client.launch). A
blocking descriptor takes it all; a non-blocking one (an agent's CLI may hand its commands a
pipe or socket it made non-blocking) raises EAGAIN once the pipe is full, and `client._write`
took that for a reader gone: the rest of a tool's output was dropped, and wfa still exited with
the answer's status (0), so the agent read a cut answer as a whole one. It waits for room now.
"""

from __future__ import annotations

import os
import threading
import time

from agentswf.launcher import client

ANSWER_CHARS = 300_000  # a tool's output several times a pipe's buffer


def test_wfa_writes_its_whole_answer_to_a_non_blocking_stdout() -> None:
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    got = bytearray()

    def slow_reader() -> None:
        time.sleep(0.1)  # the reader comes after the pipe has filled
        while chunk := os.read(read_end, 65536):
            got.extend(chunk)

    reader = threading.Thread(target=slow_reader)
    reader.start()
    try:
        client._write(write_end, "x" * ANSWER_CHARS)
    finally:
        os.close(write_end)
        reader.join(timeout=10)
        os.close(read_end)
    assert len(got) == ANSWER_CHARS
