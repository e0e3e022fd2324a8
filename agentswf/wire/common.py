"""What both ends of the `wfa` wire share, in plain Python with no imports at all.

The `wfa` client loads this file directly (not through the package), so it can
start in milliseconds; everything here must stay free of imports.
"""

WIRE_VERSION = 1

# Limits -------------------------------------------------------------------------------

MAX_STDIN_BYTES = 1024 * 1024  # what `wfa` reads from standard input
STDIN_TIMEOUT_SECONDS = 30.0  # standard input must close within this
MAX_REQUEST_BYTES = 2 * 1024 * 1024 + 4096  # one request line: 1 MiB of text escaped as JSON
MAX_RESPONSE_BYTES = 4 * 1024 * 1024  # one response line, as the client reads it
ANSWER_TIMEOUT_SECONDS = 30.0  # every command but `wfa tool` waits this long for its answer
REQUEST_LINE_TIMEOUT_SECONDS = 5.0  # the whole request must arrive within this of connecting (wfa writes it at once)
ANSWER_DELIVERY_TIMEOUT_SECONDS = 5.0  # the client must take its whole answer within this
MAX_OPEN_CONNECTIONS = 64  # in one run, across all agents (and at most a quarter of its file descriptors)
MAX_NESTING_DEPTH = 64  # arrays and objects inside one another, in any JSON the run decodes
MAX_WAITING_REASON_BYTES = 2048
MIN_WAITING_SECONDS = 30.0
DEFAULT_WAITING_SECONDS = 120.0
MAX_TOOL_NAME_CHARS = 48

# Names --------------------------------------------------------------------------------

_TOOL_NAME_START = frozenset("abcdefghijklmnopqrstuvwxyz")
_TOOL_NAME_CHARACTERS = _TOOL_NAME_START | frozenset("0123456789_")


def is_tool_name(name):
    """Whether `name` can be a tool's: lowercase letters, digits and `_`, starting with a letter,
    at most MAX_TOOL_NAME_CHARS characters. A workflow's tools are checked by it as an agent opens;
    a `wfa tool` request naming anything else is refused before the run reads it further."""
    return (
        0 < len(name) <= MAX_TOOL_NAME_CHARS
        and name[0] in _TOOL_NAME_START
        and all(char in _TOOL_NAME_CHARACTERS for char in name)
    )

# Commands and exit statuses -----------------------------------------------------------

COMMANDS = ("result", "tool", "waiting", "peers", "send", "reply")
# The codes themselves are `wire.codes.Code`; the client also passes `exit_code` its own
# "lost" (the answer didn't come back) and "unreached" (the request never got there).

EXIT_OK = 0
EXIT_FAILED = 1  # refused, or failed on the way (every command but tool)
EXIT_USAGE = 2
EXIT_TOOL_REFUSED = 3  # tool: refused, or never reached the workflow
EXIT_TOOL_UNCERTAIN = 4  # tool: timed out, cancelled, or its answer lost: it may have run


def exit_code(command, code):
    """The exit status for `command` answered with `code` (None for success)."""
    if code is None:
        return EXIT_OK
    if command != "tool":
        return EXIT_FAILED
    if code == "failed":
        return EXIT_FAILED
    if code in ("timed-out", "internal-error", "lost"):
        return EXIT_TOOL_UNCERTAIN
    return EXIT_TOOL_REFUSED


# Durations ----------------------------------------------------------------------------

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


def parse_duration(text):
    """Seconds in a duration like `90s`, `1.5m`, `10m`, `2h`, `1d`, or None if it isn't one.

    A positive decimal and a unit, nothing else: no sign, no exponent, no spaces.
    """
    if len(text) < 2 or text[-1] not in _UNIT_SECONDS:
        return None
    number = text[:-1]
    whole, dot, fraction = number.partition(".")
    if not whole.isdigit() or not whole.isascii():
        return None
    if dot and (not fraction.isdigit() or not fraction.isascii()):
        return None
    seconds = float(number) * _UNIT_SECONDS[text[-1]]
    if seconds <= 0 or seconds == float("inf"):
        return None
    return seconds
