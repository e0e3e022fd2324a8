"""How deeply a JSON text nests, found without decoding it, so hostile JSON never reaches a decoder.

msgspec (like every JSON decoder in Python) recurses once per array or object it
enters, and so does any code that walks the decoded value: JSON nested a thousand
deep, two kilobytes of brackets, would raise RecursionError wherever it lands. Every
JSON text from an agent's side is measured here first; one nested deeper than
MAX_NESTING_DEPTH is refused. The scan loops over nothing in Python: strings are
removed by one regular expression, everything but brackets by `bytes.translate`, and
the depth is the highest running sum of +1 and -1.
"""

from __future__ import annotations

import re
from itertools import accumulate

from .common import MAX_NESTING_DEPTH

# A JSON string, escapes and all; DOTALL so an escaped byte of any value is taken.
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


def nesting_depth(text: bytes | str) -> int:
    """The deepest nesting of arrays and objects in `text` (0 for a scalar).

    Never less than what a decoder would enter: an unterminated string's brackets
    count, and so do brackets after the end of the value, so malformed text can only
    be measured deeper than it is, never shallower.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    brackets = _STRING.sub(b"", data).translate(None, _NOT_BRACKETS)
    return max(0, max(accumulate(map(_STEP.__getitem__, brackets)), default=0))


def too_deep(text: bytes | str) -> str | None:
    """Why `text` won't be decoded (its nesting is over the limit), or None when it may be."""
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING_DEPTH:  # too few brackets to nest too deep
        return None
    depth = nesting_depth(data)
    if depth <= MAX_NESTING_DEPTH:
        return None
    return (
        f"the JSON nests arrays and objects {depth} deep, over the run's limit of "
        f"{MAX_NESTING_DEPTH} (MAX_NESTING_DEPTH); flatten it"
    )
