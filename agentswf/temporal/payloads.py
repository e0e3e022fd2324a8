"""How agentswf's values become Temporal payloads: Temporal's own converters, but JSON objects with
their keys in the order they were made.

Temporal's JSON converter sorts an object's keys, so a run's value (a dict the workflow built, a
schema's Struct) would read otherwise on Temporal than locally. A Python dict keeps its order, so
the bytes are as deterministic as sorted ones: the same code makes the same payload on replay."""

from __future__ import annotations

import json
from typing import Any

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    AdvancedJSONEncoder,
    CompositePayloadConverter,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)


class InOrderJSON(JSONPlainPayloadConverter):
    """`json/plain`, an object's keys in their order."""

    def to_payload(self, value: Any) -> Payload | None:
        data = json.dumps(value, cls=AdvancedJSONEncoder, separators=(",", ":"))
        return Payload(metadata={"encoding": self.encoding.encode()}, data=data.encode())


class InOrderPayloadConverter(CompositePayloadConverter):
    """Temporal's default payload converters, its JSON one `InOrderJSON`."""

    def __init__(self) -> None:
        super().__init__(*(
            InOrderJSON() if isinstance(converter, JSONPlainPayloadConverter) else converter
            for converter in DefaultPayloadConverter.default_encoding_payload_converters
        ))
