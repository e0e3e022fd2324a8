"""How long one `wfa` round trip takes, against the bare interpreter starting and exiting.

    python benchmarks/wfa.py [N]        (default N=200)

Writes a real launcher script (as the engine does) into a temporary directory, serves the
socket from a thread of this process (decoding each request with the server's
`decode_request` and answering a refused `wfa result`), then times, interleaved, N runs of
`<launcher> result c1 --verdict approve` and N runs of `python -S -I -c pass` with the same
interpreter, and N runs through the bytecode launcher of `client.launcher_script`. Prints the
median seconds per call and the ratio to the baseline; the goal is a ratio of at most 1.3.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from agentswf.launcher import client
from agentswf.wire import ResultRequest, decode_request, encode_response, refused

CLIENT = Path(client.__file__).resolve()


def serve(listener: socket.socket, counts: dict) -> None:
    while True:
        try:
            conn, _ = listener.accept()
        except OSError:
            return
        with conn:
            data = b""
            while chunk := conn.recv(65536):
                data += chunk
            request = decode_request(data)
            assert isinstance(request, ResultRequest), request
            counts["served"] += 1
            conn.sendall(
                encode_response(
                    refused("result", "unknown-operation", "no open call has the id c1; check it.")
                )
            )


def launcher(directory: str, socket_path: str, name: str = "wfa", bytecode: bool = False) -> str:
    """The launcher as the brief has the engine write it: `exec python -S -I client.py ...`;
    with `bytecode`, `client.launcher_script`'s, which imports client.py as a module instead."""
    path = os.path.join(directory, name)
    if bytecode:
        text = client.launcher_script(sys.executable, socket_path)
    else:
        text = f"#!/bin/sh\nexec '{sys.executable}' -S -I '{CLIENT}' --at '{socket_path}' \"$@\"\n"
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, 0o500)
    return path


def main(argv: list[str]) -> None:
    n = int(argv[0]) if argv else 200
    with tempfile.TemporaryDirectory(prefix="awf-bench-") as directory:
        socket_path = os.path.join(directory, "s.sock")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(socket_path)
        listener.listen(64)
        counts = {"served": 0}
        thread = threading.Thread(target=serve, args=(listener, counts), daemon=True)
        thread.start()
        wfa = [launcher(directory, socket_path), "result", "c1", "--verdict", "approve"]
        bare = [sys.executable, "-S", "-I", "-c", "pass"]
        boot = [launcher(directory, socket_path, "wfa-bytecode", bytecode=True), *wfa[1:]]

        def once(cmd: list[str], expect: int) -> float:
            start = time.perf_counter()
            done = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True)
            elapsed = time.perf_counter() - start
            assert done.returncode == expect, (cmd, done)
            return elapsed

        for _ in range(5):  # warm the caches (and write client and common bytecode)
            once(wfa, 1)
            once(boot, 1)
            once(bare, 0)
        ours, baseline, cached = [], [], []
        for _ in range(n):
            ours.append(once(wfa, 1))
            baseline.append(once(bare, 0))
            cached.append(once(boot, 1))
        listener.close()
        assert counts["served"] == 2 * (n + 5), counts

    def per_call(times: list[float]) -> float:
        # The median, so a stray scheduling hiccup doesn't move it.
        return sorted(times)[len(times) // 2]

    o, b, c = per_call(ours), per_call(baseline), per_call(cached)
    print(f"wfa_result_roundtrip: ours={o:.5f} baseline={b:.5f} ratio={o / b:.2f}")
    print(f"wfa_result_roundtrip_bytecode_launcher: ours={c:.5f} baseline={b:.5f} ratio={c / b:.2f}")
    print(f"(N={n}, median per call, {sys.executable} {sys.version.split()[0]})")


if __name__ == "__main__":
    main(sys.argv[1:])
