"""Inside a sandbox, the one way out: loopback ports that lead to agentswf's proxy.

    python -S -I forwarder.py <proxy socket> <proxy port> [<host>:<port> …] -- <argv…>

A sandbox has a network namespace of its own (only its own loopback), so nothing inside can
reach a host, or a port of the host's loopback. This binds, inside, `127.0.0.1:<proxy port>`
(where HTTPS_PROXY points) and each `<host>:<port>` tunnel (a model endpoint on the host's
loopback, where the CLI's base URL points), then forks: the child relays every connection to
the proxy's unix socket (bound into the sandbox), a tunnel's after a `CONNECT <host>:<port>`,
and the parent execs the agent's command, so the command is what the sandbox's init waits for
and its exit status is the attempt's. When it ends, the sandbox's pid namespace ends, and
the relay with it. The proxy, outside, decides what may be reached; this decides nothing.

Standard library C modules only (`_socket`, `_thread`: `socket` and `threading` would
double its start, as the keeper's docstring says of `signal`), run on the run's own
interpreter with `-S -I`.
"""

import _socket
import _thread
import os
import sys

CHUNK_BYTES = 65536
_PR_SET_PDEATHSIG = 1
_SIGKILL = 9
MAX_REPLY_HEAD_BYTES = 8192  # of the proxy's answer to a tunnel's CONNECT
LISTEN_BACKLOG = 64


def relay(source, target):
    """Copy `source` to `target` until end-of-file, then half-close `target`."""
    try:
        while True:
            data = source.recv(CHUNK_BYTES)
            if not data:
                break
            target.sendall(data)
    except OSError:
        pass
    try:
        target.shutdown(_socket.SHUT_WR)
    except OSError:
        pass


def _open_tunnel(proxy, target):
    """CONNECT `target` through the proxy; True once it answered 200."""
    proxy.sendall(("CONNECT " + target + " HTTP/1.1\r\nHost: " + target + "\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        data = proxy.recv(1)  # byte by byte: what follows the head is the tunnel's, not ours
        if not data or len(head) > MAX_REPLY_HEAD_BYTES:
            return False
        head += data
    return head.split(b" ", 2)[1:2] == [b"200"]


def serve(client, proxy_path, target):
    proxy = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    back = _thread.allocate_lock()
    try:
        proxy.connect(proxy_path)
        if target is not None and not _open_tunnel(proxy, target):
            return
        back.acquire()
        _thread.start_new_thread(_relay_then_release, (proxy, client, back))
        relay(client, proxy)
        back.acquire()  # the other way is done too
    except OSError:
        pass
    finally:
        proxy.close()
        client.close()


def _relay_then_release(source, target, done):
    try:
        relay(source, target)
    finally:
        done.release()


def accept_forever(listener, proxy_path, target):
    while True:
        try:
            fd, _ = listener._accept()
        except OSError:
            continue
        _thread.start_new_thread(serve, (_socket.socket(fileno=fd), proxy_path, target))


def listen(host, port):
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    listener = _socket.socket(family, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(LISTEN_BACKLOG)
    return listener


def split_target(text):
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


def die_with_parent(parent):
    """SIGKILL this process when `parent` (the command, once it has exec'd) ends: the sandbox's
    pid namespace does that already; this holds wherever the forwarder runs. Through
    `_ctypes`, as the keeper's `become_subreaper` is."""
    try:
        import _ctypes

        class Int(_ctypes._SimpleCData):
            _type_ = "i"

        class Function(_ctypes.CFuncPtr):
            _flags_ = _ctypes.FUNCFLAG_CDECL
            _restype_ = Int

        prctl = Function(_ctypes.dlsym(_ctypes.dlopen(None), "prctl"))
        prctl(_PR_SET_PDEATHSIG, _SIGKILL, 0, 0, 0)
    except (ImportError, OSError, AttributeError):
        pass
    if os.getppid() != parent:  # it ended before the signal was asked for
        os._exit(0)


def main(argv):
    if "--" not in argv or len(argv) < argv.index("--") + 2 or argv.index("--") < 2:
        sys.exit("usage: forwarder.py <proxy socket> <proxy port> [<host>:<port> …] -- <argv…>")
    split = argv.index("--")
    proxy_path, port, tunnels, command = argv[0], int(argv[1]), argv[2:split], argv[split + 1 :]
    listeners = [(listen("127.0.0.1", port), None)]
    for target in tunnels:
        host, tunnel_port = split_target(target)
        for address in ("127.0.0.1", "::1") if host == "localhost" else (host,):
            try:
                listeners.append((listen(address, tunnel_port), target))
            except OSError:
                if address != "::1":  # no IPv6 loopback inside is no loss; no IPv4 one is
                    raise
    parent = os.getpid()
    if os.fork() == 0:  # the relay: it holds none of the command's standard streams
        die_with_parent(parent)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        for listener, target in listeners[1:]:
            _thread.start_new_thread(accept_forever, (listener, proxy_path, target))
        accept_forever(listeners[0][0], proxy_path, None)
    for listener, _ in listeners:
        listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as error:
        sys.stderr.write("agentswf: can't run " + command[0] + ": " + str(error.strerror or error) + "\n")
        os._exit(127 if isinstance(error, FileNotFoundError) else 126)


if __name__ == "__main__":
    main(sys.argv[1:])
