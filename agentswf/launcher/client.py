"""`wfa`, the agent's command: one request to the run over the agent's socket, one answer back.

The launcher the run installs for an agent (``launcher_script``) imports this file and calls
``main(["--at", <socket>, <command>, ...])``. An agent may run `wfa` hundreds of times in
a turn, so it must start about as fast as the interpreter itself (the goal: a round trip within
1.3 times ``python -S -I -c pass``). That is why it is written the odd way:

- standard library C modules only, the ones a bare interpreter has not loaded yet costing well
  under a millisecond: ``_socket`` rather than ``socket`` (enum, selectors), ``_json`` rather than
  ``json`` (re), ``posix`` rather than ``os``; ``select`` only when standard input is read;
- the wire constants come from ``agentswf/wire/common.py`` loaded as a top-level module (it has no
  imports), not through the ``agentswf`` package, whose ``__init__`` pulls in msgspec;
- nothing is found by searching sys.path: the launcher loads this file, this file loads
  ``common.py``, ``_json`` and ``_socket`` from where they are, with the import system's own
  loaders (``_load``); a search lists each new directory first (0.2 to 0.3 ms in all here);
- no argparse: the few forms are parsed by hand;
- ``launcher_script`` writes a launcher that imports this file as a module, from its cached
  bytecode: run as the main script, Python compiles it from source every time (2 to 3 ms here,
  a third of the interpreter's own start), which alone puts the round trip over the goal; and
  the launcher is a `#!<python> -SI` script where the path allows, sparing an exec of /bin/sh;
- the launcher ends the process with ``launch``'s ``posix._exit``: the interpreter's teardown
  costs about 1 ms of CPU here, more than the client's imports and its round trip together.

The pure parts (``build_request``, ``encode_request``, ``decode_response``, ``read_stdin``,
``call``) import as ``agentswf.launcher.client`` so tests and scripted agents speak the wire
through the same code as the client. The client is a dumb pipe: the run decides every answer,
and the response says what to print and which status to exit with.
"""

import posix
import sys
from time import monotonic


def _load(name, path, loader=None):
    """The module `name` from the file at `path`, by the import system's own loaders called
    directly: an `import` searches sys.path first, listing each directory it hasn't seen
    (about 0.15 ms for the two directories of ours and lib-dynload's 80 entries)."""
    from _frozen_importlib import module_from_spec
    from _frozen_importlib_external import spec_from_file_location

    spec = spec_from_file_location(name, path, loader=loader)
    module = module_from_spec(spec)  # an extension module is loaded here, or raises ImportError
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_extension(name):
    """The C module `name`: loaded from the interpreter's lib-dynload without the search where
    it is a file there; anything else (loaded already, built in, elsewhere) comes from `import`."""
    if name not in sys.modules and name not in sys.builtin_module_names:
        from _frozen_importlib_external import EXTENSION_SUFFIXES, ExtensionFileLoader

        for directory in sys.path:
            if directory.endswith("/lib-dynload"):
                path = f"{directory}/{name}{EXTENSION_SUFFIXES[0]}"
                try:
                    return _load(name, path, ExtensionFileLoader(name, path))
                except ImportError:  # not there under this name: `import` finds it
                    sys.modules.pop(name, None)
                break
    return __import__(name)


if "." not in __name__:  # run by a launcher, not imported from the package: load common.py alone
    common = _load("common", (__file__.rpartition("/")[0] or ".") + "/../wire/common.py")
    _json = _load_extension("_json")
    _socket = _load_extension("_socket")
else:
    import _json  # type: ignore[no-redef]
    import _socket  # type: ignore[no-redef]

    from ..wire import common

__all__ = [
    "Lost",
    "Unreached",
    "UsageError",
    "build_request",
    "call",
    "decode_response",
    "encode_request",
    "launch",
    "launcher_script",
    "main",
    "read_stdin",
    "usage",
]

_USAGE = """\
usage: {wfa} result <call-id> --<name> '<value>' ...
       {wfa} result <call-id> <<'WF_JSON'
       <json>
       WF_JSON
       {wfa} tool <name> --<option> '<value>' ...
       {wfa} tool <name> <<'WF_JSON'
       <json>
       WF_JSON
       {wfa} waiting <call-id> --reason <text> [--timeout <duration>]
       {wfa} peers [--json]
       {wfa} send [--await-reply [--timeout <duration>]] <peer> <<'EOF'
       <message>
       EOF
       {wfa} reply [--await-reply [--timeout <duration>]] <peer> <<'EOF'
       <answer>
       EOF
"""

# What a lost answer means for each command: whether the request may have taken effect.
_MAY_HAVE = {
    "result": "the result may have been accepted: check before answering again",
    "tool": "the call may have run: check before calling again",
    "waiting": "the wait may have been granted; nothing was retried",
    "peers": "nothing was retried; wfa peers changes nothing, so it is safe to run again",
    "send": "the message may have been queued; do not send it again",
    "reply": "the reply may have been queued; do not send it again",
}


class UsageError(Exception):
    """A command line `wfa` refuses itself (exit 2); nothing is sent."""


class Unreached(Exception):
    """The request never reached the run, so it did nothing."""


class Lost(Exception):
    """The request was sent but its answer was lost: it may have taken effect."""


def usage(wfa="wfa"):
    """The usage text, naming the launcher as `wfa`."""
    return _USAGE.replace("{wfa}", wfa)


# Standard input ------------------------------------------------------------------------


_S_IFMT = 0o170000  # the file-type bits of st_mode, as the stat module has them
_S_IFIFO = 0o010000
_S_IFSOCK = 0o140000


def _read_to_end(fd, limit):
    chunks = []
    size = 0
    while True:
        try:
            chunk = posix.read(fd, 65536)
        except OSError as error:
            raise UsageError(f"could not read standard input: {error.strerror}") from None
        if not chunk:
            return b"".join(chunks).decode("utf-8", "replace")
        size += len(chunk)
        if size > limit:
            raise UsageError(f"standard input is over {limit} bytes; write a file and pass its path")
        chunks.append(chunk)


def read_stdin(
    fd=0, limit=common.MAX_STDIN_BYTES, timeout=common.STDIN_TIMEOUT_SECONDS
):
    """Standard input as text: "" for a terminal; raises UsageError if over `limit` bytes or
    not closed within `timeout` seconds."""
    if posix.isatty(fd):
        return ""
    try:
        kind = posix.fstat(fd).st_mode & _S_IFMT
    except OSError:  # fd 0 not open at all: no input
        return ""
    if kind != _S_IFIFO and kind != _S_IFSOCK:  # a file or /dev/null: it ends, and never blocks
        return _read_to_end(fd, limit)
    import select

    deadline = monotonic() + timeout
    chunks = []
    size = 0
    while True:
        remaining = deadline - monotonic()
        if remaining <= 0:
            raise UsageError(
                f"standard input was not closed within {timeout:g} seconds; "
                "pass the value as flags or end the heredoc"
            )
        try:
            ready = select.select((fd,), (), (), remaining)[0]
        except OSError:  # fd 0 not open at all: no input
            return ""
        if not ready:
            continue
        try:
            chunk = posix.read(fd, 65536)
        except BlockingIOError:
            continue
        except OSError as error:
            raise UsageError(f"could not read standard input: {error.strerror}") from None
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            raise UsageError(f"standard input is over {limit} bytes; write a file and pass its path")
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


# The command line ----------------------------------------------------------------------


def _timeout_ms(text):
    seconds = common.parse_duration(text)
    if seconds is None:
        raise UsageError(f"bad duration {text!r}: a positive decimal and s, m, h or d, like 90s or 10m")
    return max(1, round(seconds * 1000))


def _flag_value(args, i, name):
    """The value of the flag at args[i] (`--name value` or `--name=value`) and the next index."""
    arg = args[i]
    if arg == name:
        if i + 1 >= len(args):
            raise UsageError(f"{name} takes a value")
        return args[i + 1], i + 2
    return arg[len(name) + 1 :], i + 1


def _with_input(command, key, args, read):
    if not args or args[0].startswith("-"):
        raise UsageError(f"wfa {command} needs a {'call id' if key == 'call_id' else 'tool name'}")
    rest = args[1:]
    # Standard input is read only when nothing follows the call id or tool name.
    return {key: args[0], "args": rest, "input": None if rest else read()}


def _waiting(args):
    call_id = reason = timeout_ms = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--reason" or arg.startswith("--reason="):
            if reason is not None:
                raise UsageError("--reason is given twice")
            reason, i = _flag_value(args, i, "--reason")
        elif arg == "--timeout" or arg.startswith("--timeout="):
            if timeout_ms is not None:
                raise UsageError("--timeout is given twice")
            value, i = _flag_value(args, i, "--timeout")
            timeout_ms = _timeout_ms(value)
        elif arg.startswith("-"):
            raise UsageError(f"wfa waiting takes no flag {arg}")
        elif call_id is None:
            call_id, i = arg, i + 1
        else:
            raise UsageError(f"unexpected argument {arg!r}; quote the reason")
    if call_id is None:
        raise UsageError("wfa waiting needs a call id")
    if reason is None:
        raise UsageError("wfa waiting needs --reason <text>")
    if not reason.strip():
        raise UsageError("the reason is blank")
    if len(reason.encode("utf-8", "surrogateescape")) > common.MAX_WAITING_REASON_BYTES:
        raise UsageError(f"the reason is over {common.MAX_WAITING_REASON_BYTES} bytes")
    return {"call_id": call_id, "reason": reason, "timeout_ms": timeout_ms}


def _peers(args):
    for arg in args:
        if arg != "--json":
            raise UsageError(f"wfa peers takes only --json, not {arg!r}")
    return {"json": bool(args)}


def _message(command, args, read):
    await_reply = False
    timeout_ms = None
    peer = None
    i = 0
    # Flags go before the message: before the peer or right after it.
    for stop in (0, 1):
        while i < len(args) and args[i].startswith("--"):
            arg = args[i]
            if arg == "--await-reply":
                await_reply, i = True, i + 1
            elif arg == "--timeout" or arg.startswith("--timeout="):
                if timeout_ms is not None:
                    raise UsageError("--timeout is given twice")
                value, i = _flag_value(args, i, "--timeout")
                timeout_ms = _timeout_ms(value)
            else:
                raise UsageError(
                    f"wfa {command} takes no flag {arg}; a message that starts with -- goes in a heredoc"
                )
        if stop == 0:
            if i >= len(args):
                raise UsageError(f"wfa {command} needs a peer")
            peer, i = args[i], i + 1
    if timeout_ms is not None and not await_reply:
        raise UsageError("--timeout goes only with --await-reply")
    rest = args[i:]
    if len(rest) > 1 and rest[-1].startswith("--"):
        raise UsageError(f"flags go before the message, before or right after the peer: wfa {command} {rest[-1]} {peer} ...")
    if len(rest) > 1:
        raise UsageError("the message is one final argument: quote it, or use a heredoc")
    if rest:
        message = rest[0]
    else:
        message = read()
        if message.endswith("\n"):  # a heredoc's final newline
            message = message[:-1]
    if not message:
        raise UsageError("no message: give it as one final argument or in a heredoc")
    return {"peer": peer, "message": message, "await_reply": await_reply, "timeout_ms": timeout_ms}


def build_request(argv, read_stdin=read_stdin):
    """The request fields for a `wfa` command line (without `--at`), or a UsageError to print.

    `read_stdin` is called, with no arguments, only when the command reads standard input; it
    returns the text or raises UsageError.
    """
    try:
        if not argv:
            raise UsageError("no command given")
        command, args = argv[0], argv[1:]
        if command == "result":
            fields = _with_input(command, "call_id", args, read_stdin)
        elif command == "tool":
            fields = _with_input(command, "name", args, read_stdin)
        elif command == "waiting":
            fields = _waiting(args)
        elif command == "peers":
            fields = _peers(args)
        elif command == "send" or command == "reply":
            fields = _message(command, args, read_stdin)
        else:
            raise UsageError(f"unknown command {command!r}")
    except UsageError as error:
        return error
    return {"command": command, "version": common.WIRE_VERSION, **fields}


# The wire ------------------------------------------------------------------------------


def _unencodable(value):
    raise TypeError(f"{type(value).__name__} is not JSON")


_encode = _json.make_encoder(
    None, _unencodable, _json.encode_basestring, None, ":", ",", False, False, False
)


def encode_request(fields):
    """The request line for `fields`: compact JSON, UTF-8, and a newline."""
    text = "".join(_encode(fields, 0)) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # undecodable bytes in argv: pass them through as they came
        return text.encode("utf-8", "surrogateescape")


class _Ctx:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = float
    memo = {}  # type: ignore[var-annotated]  # noqa: RUF012 (the scanner's own memo, as json's context has)


_scan = _json.make_scanner(_Ctx)  # type: ignore[arg-type]  # a context is any object with these fields


def decode_response(line):
    """The response in `line` as a dict; raises ValueError unless it is one line of a JSON
    object with an int `exit` (0 to 255) and str `stdout` and `stderr`."""
    if not line.endswith(b"\n") or line.count(b"\n") != 1:
        raise ValueError("the answer is not one line")
    try:
        text = line[:-1].decode("utf-8")
        response, end = _scan(text, 0)
    except Exception as error:  # the scanner's errors live in json.decoder
        raise ValueError(f"the answer is not JSON: {error}") from None
    if end != len(text) or type(response) is not dict:
        raise ValueError("the answer is not a JSON object")
    code = response.get("exit")
    if type(code) is not int or not 0 <= code <= 255:
        raise ValueError("the answer has no exit status")
    if type(response.get("stdout")) is not str or type(response.get("stderr")) is not str:
        raise ValueError("the answer has no output")
    return response


def _reason(error):
    return getattr(error, "strerror", None) or str(error) or type(error).__name__


def _answer_sent_already(sock):
    """The answer the run sent before it stopped reading, or None if there is none whole."""
    buffer = b""
    try:
        sock.settimeout(0)
        while not buffer.endswith(b"\n"):
            chunk = sock.recv(262144)
            if not chunk:
                break
            buffer += chunk
        return decode_response(buffer)
    except (OSError, ValueError):
        return None


def call(path, fields, answer_timeout=common.ANSWER_TIMEOUT_SECONDS):
    """Send `fields` once to the run at socket `path` and return its decoded response.

    Raises Unreached when the request did not get through whole (nothing was done), Lost when
    it did but no well-formed answer came within `answer_timeout` seconds (None: wait as long
    as it takes). Never retries.
    """
    data = encode_request(fields)
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        # The run takes the whole request within this of connecting, or closes the connection.
        sock.settimeout(common.REQUEST_LINE_TIMEOUT_SECONDS)
        try:
            sock.connect(path)
        except (OSError, ValueError) as error:
            raise Unreached(f"could not connect: {_reason(error)}", getattr(error, "errno", None)) from None
        try:
            sock.sendall(data)
        except OSError as error:
            # The run acts only on a whole line: one that didn't get through did nothing. It may
            # have said why, refusing the connection before reading it (over its budget).
            refusal = _answer_sent_already(sock)
            if refusal is None:
                raise Unreached(f"the request did not get through: {_reason(error)}") from None
            return refusal
        try:
            sock.shutdown(_socket.SHUT_WR)
        except OSError:
            pass
        deadline = None if answer_timeout is None else monotonic() + answer_timeout
        buffer = b""
        limit = common.MAX_RESPONSE_BYTES
        while b"\n" not in buffer:
            if deadline is None:
                sock.settimeout(None)
            else:
                remaining = deadline - monotonic()
                if remaining <= 0:
                    raise Lost(f"no answer within {answer_timeout:g} seconds")
                sock.settimeout(remaining)
            try:
                chunk = sock.recv(262144)
            except TimeoutError:
                continue
            except OSError as error:
                raise Lost(f"the connection failed: {_reason(error)}") from None
            if not chunk:
                raise Lost("the connection closed before the answer came")
            buffer += chunk
            if len(buffer) > limit:
                raise Lost(f"the answer is over {limit} bytes")
        try:
            return decode_response(buffer)
        except ValueError as error:
            raise Lost(str(error)) from None
    finally:
        sock.close()


# The command ---------------------------------------------------------------------------


def _write(fd, text):
    data = text.encode("utf-8", "replace")
    try:
        while data:
            try:
                data = data[posix.write(fd, data) :]
            except BlockingIOError:  # a non-blocking descriptor, full for now: wait for room, not give up
                import select  # only on this path: the client's start stays short

                select.select([], [fd], [])
    except OSError:  # a closed pipe: the reader left
        pass


def main(argv):
    """Run `wfa` for `argv` (``--at <socket> <command> ...``) and return the exit status."""
    if len(argv) < 2 or argv[0] != "--at":
        _write(
            2,
            "wfa: run wfa through the launcher the run installed for this agent; "
            "your prompt shows its full path.\n",
        )
        return common.EXIT_USAGE
    path = argv[1]
    if argv[2:3] in (["--help"], ["-h"], ["help"]):
        _write(1, usage((path.rpartition("/")[0] or ".") + "/wfa"))
        return common.EXIT_OK
    try:
        fields = build_request(argv[2:], read_stdin)
    except KeyboardInterrupt:  # nothing was sent
        return 130
    if isinstance(fields, UsageError):
        _write(2, f"wfa: {fields}\n" + usage((path.rpartition("/")[0] or ".") + "/wfa"))
        return common.EXIT_USAGE
    command = fields["command"]
    size = len(encode_request(fields))
    if size > common.MAX_REQUEST_BYTES:  # refused here, as the run would: sending it would only break the pipe
        _write(
            2,
            f"wfa: {command} refused (request-too-large): the request is {size} bytes, over the run's limit of "
            f"{common.MAX_REQUEST_BYTES}; nothing was sent. Write a long value to a file and pass its path.\n",
        )
        return common.exit_code(command, "request-too-large")
    try:
        response = call(path, fields, None if command == "tool" else common.ANSWER_TIMEOUT_SECONDS)
    except Unreached as error:
        where = "never reached the workflow: the handler didn't run" if command == "tool" else "never reached the run: nothing was done"
        if _run_is_over(error):
            _write(2, f"wfa: {command} {where}: {NOBODY_LISTENING}\n")
        else:
            _write(2, f"wfa: {command} {where} ({error}). Try again.\n")
        return common.exit_code(command, "unreached")
    except (Lost, KeyboardInterrupt) as error:
        why = str(error) or "interrupted"
        _write(2, f"wfa: the answer to {command} was lost ({why}); {_MAY_HAVE[command]}.\n")
        return common.exit_code(command, "lost")
    _write(1, response["stdout"])
    _write(2, response["stderr"])
    return response["exit"]


def launch(argv):
    """Run `wfa` for `argv` (as `main`) and end the process with its exit status at once,
    skipping the interpreter's teardown: that takes about a millisecond here, as much as all of
    wfa's own work, and wfa leaves it nothing to do (what it prints went out with `posix.write`,
    unbuffered; its socket is closed; it registers no exit handler)."""
    posix._exit(main(argv))


NOBODY_LISTENING = (
    "nobody is listening: your turn is over or the run is over (an agent's socket is open only during "
    "its turns), so nothing more can be done now. Stop."
)


def _run_is_over(error):
    """No socket, or nobody listening on it: the run has ended (its socket goes with it)."""
    import errno  # built in, and only on this path

    return error.args[1:] in ((errno.ENOENT,), (errno.ECONNREFUSED,))


def _sh(text):
    return "'" + text.replace("'", "'\\''") + "'"


MAX_SHEBANG_BYTES = 127  # some kernels cut a #! line at 128 bytes


def launcher_script(python, socket_path):
    """A launcher for the agent whose socket is `socket_path` (both paths absolute).

    It loads this file as a module (by its path, not by searching sys.path) rather than running
    it as the main script: a main script is compiled from source on every run (about 2.5 ms
    here), a module loads its cached bytecode.
    Where the interpreter's path fits a `#!` line, the launcher is itself a one-line Python
    script run by `#!<python> -SI`, which saves the exec of /bin/sh (about 0.7 ms here);
    otherwise it is a `#!/bin/sh` line that execs the interpreter with `-S -I`.
    """
    load = (
        "import sys,_frozen_importlib as b;from _frozen_importlib_external import spec_from_file_location as f;"
        f"s=f('client',{__file__!r});c=sys.modules['client']=b.module_from_spec(s);s.loader.exec_module(c);"
    )
    shebang = f"#!{python} -SI"
    if len(shebang.encode()) <= MAX_SHEBANG_BYTES and not any(c.isspace() for c in python):
        return f"{shebang}\n{load}c.launch([\"--at\",{str(socket_path)!r}]+sys.argv[1:])\n"
    boot = f"{load}c.launch(sys.argv[1:])"
    return f'#!/bin/sh\nexec {_sh(python)} -S -I -c {_sh(boot)} --at {_sh(socket_path)} "$@"\n'


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
