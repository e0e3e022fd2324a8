"""Payloads encrypted in Temporal's history: a payload codec with the deployment's payload key.

Everything agentswf sends through Temporal is a payload: the workflow's input and result,
each turn's request (its prompt) and its `Turn` (the answer), each tool call's input and
result, each message, each update and query. Whoever reads the namespace (`temporal workflow
show`, the Web UI) reads them as they are. With a payload key, every process of the deployment
(`awf run --engine temporal`, `awf worker`, a person's `awf` commands) encrypts each payload
before it leaves, and decrypts what comes, with AES-256-GCM, as Temporal's encryption samples
do: the payload becomes `binary/encrypted`, its data a 12-byte random nonce and the
ciphertext of the whole original payload, its metadata the key's id. A failure's message and
stack trace are encrypted too (Temporal's encoded failure attributes).

The key is 32 random bytes in base64 (`openssl rand -base64 32`) in AGENTSWF_PAYLOAD_KEY; its
id is derived from it (`payload_key_id`), so nothing else is set up and two processes that
name the same id hold the same key. Rotation: the new key in AGENTSWF_PAYLOAD_KEY, the old
ones in AGENTSWF_PAYLOAD_OLD_KEYS (comma-separated), which still decrypt what they encrypted.
Without a key nothing is encrypted (`awf worker` says so), and a payload encrypted with a key
this process doesn't hold is a `PayloadKeyError` naming the key's id, never plaintext guessed.

A process that hosts workflows' code (`awf run --engine temporal`, `awf worker --workflow`) ends
a run whose worker's answer it can't decrypt (`HostCipher`): Temporal's SDK would otherwise fail
the workflow task, log a traceback and try it again for ever, the run waiting with no end.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable, Mapping, Sequence
from typing import Self

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    PayloadCodec,
    SerializationContext,
    WithSerializationContext,
)
from temporalio.exceptions import ApplicationError

from ..errors import PayloadKeyError
from ..harnesses.environment import PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE, PAYLOAD_VARIABLES
from .keys import no_dump
from .payloads import InOrderPayloadConverter

KEY_BYTES = 32  # AES-256
NONCE_BYTES = 12  # GCM's standard nonce, random for each payload
KEY_ID_CHARS = 12  # a key's id: hex of an HMAC of the key, in each payload's metadata and in errors
ENCODING_KEY = "encoding"
ENCRYPTED = b"binary/encrypted"  # the encoding Temporal's encryption samples name
KEY_ID_KEY = "encryption-key-id"
HOST_REFUSED = "PayloadKeyRefused"  # the type of the failure a run's workflow ends with when its host can't decrypt
NEW_KEY_HINT = "make one with `openssl rand -base64 32`"


def payload_key_id(key: bytes) -> str:
    """The key's id: says which key encrypted a payload without saying anything of the key."""
    return hmac.new(key, b"agentswf payload key id", hashlib.sha256).hexdigest()[:KEY_ID_CHARS]


def parse_key(text: str, variable: str) -> bytes:
    """The 32 bytes `text` (base64, standard or URL-safe) holds; else PayloadKeyError naming
    `variable`, never the value."""
    cleaned = "".join(text.split()).replace("-", "+").replace("_", "/")
    try:
        key = base64.b64decode(cleaned + "=" * (-len(cleaned) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise PayloadKeyError(f"{variable} is not base64: give {KEY_BYTES} random bytes in base64 ({NEW_KEY_HINT})") from None
    if len(key) != KEY_BYTES:
        raise PayloadKeyError(
            f"{variable} holds {len(key)} bytes, not {KEY_BYTES}: give {KEY_BYTES} random bytes in base64 ({NEW_KEY_HINT})"
        )
    return key


class KeyNotHeld(PayloadKeyError):
    """A payload came encrypted with the key `key_id`, not among `held` (ids, never keys)."""

    def __init__(self, key_id: str, held: list[str]) -> None:
        self.key_id, self.held = key_id, held
        super().__init__(f"a payload from Temporal is encrypted with payload key {key_id!r}, which this process doesn't "
                         f"hold ({held_ids(held)}): give that key in {PAYLOAD_KEY_VARIABLE}, or in "
                         f"{PAYLOAD_OLD_KEYS_VARIABLE} once rotated")


def held_ids(held: list[str]) -> str:
    return f"it holds {', '.join(held)}" if held else f"it has no payload key ({PAYLOAD_KEY_VARIABLE})"


class PayloadKeys:
    """The deployment's payload keys: `current` encrypts (None: nothing is), each of them decrypts
    what it encrypted, found by its id. Its repr shows ids only."""

    def __init__(self, current: bytes | None = None, old: Sequence[bytes] = ()) -> None:
        self.current_id = payload_key_id(current) if current is not None else None
        held = [*old, current] if current is not None else list(old)
        self._ciphers = {payload_key_id(key): AESGCM(key) for key in held}

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> PayloadKeys:
        """The keys `env` gives (AGENTSWF_PAYLOAD_KEY, AGENTSWF_PAYLOAD_OLD_KEYS); PayloadKeyError if malformed."""
        current = env.get(PAYLOAD_KEY_VARIABLE, "").strip()
        olds = [part for part in env.get(PAYLOAD_OLD_KEYS_VARIABLE, "").split(",") if part.strip()]
        if olds and not current:
            raise PayloadKeyError(f"{PAYLOAD_OLD_KEYS_VARIABLE} is given without {PAYLOAD_KEY_VARIABLE}: "
                                  f"old keys only decrypt, beside a current key that encrypts")
        old = [parse_key(part, f"{PAYLOAD_OLD_KEYS_VARIABLE} (its key {n})") for n, part in enumerate(olds, 1)]
        return cls(parse_key(current, PAYLOAD_KEY_VARIABLE) if current else None, old)

    @property
    def ids(self) -> list[str]:
        return sorted(self._ciphers)

    def encrypt(self, payload: Payload) -> Payload:
        """`payload`, encrypted with the current key; as it is without one."""
        if self.current_id is None:
            return payload
        nonce = secrets.token_bytes(NONCE_BYTES)
        sealed = self._ciphers[self.current_id].encrypt(nonce, payload.SerializeToString(), None)
        return Payload(metadata={ENCODING_KEY: ENCRYPTED, KEY_ID_KEY: self.current_id.encode()}, data=nonce + sealed)

    def decrypt(self, payload: Payload) -> Payload:
        """`payload` decrypted, if it was encrypted (else as it is); PayloadKeyError if its key isn't held
        or it doesn't decrypt (it was altered)."""
        if payload.metadata.get(ENCODING_KEY) != ENCRYPTED:
            return payload
        key_id = payload.metadata.get(KEY_ID_KEY, b"").decode(errors="replace")[:KEY_ID_CHARS]
        cipher = self._ciphers.get(key_id)
        if cipher is None:
            raise KeyNotHeld(key_id, self.ids)
        try:
            plain = cipher.decrypt(payload.data[:NONCE_BYTES], payload.data[NONCE_BYTES:], None)
        except InvalidTag:
            raise PayloadKeyError(f"a payload from Temporal encrypted with payload key {key_id} doesn't decrypt "
                                  f"with it: it was altered") from None
        return Payload.FromString(plain)

    def __repr__(self) -> str:
        return f"<PayloadKeys current={self.current_id} held={self.ids}>"


def host_refusal(error: PayloadKeyError) -> str:
    """Why a run's workflow ended when its host couldn't decrypt a worker's answer, in a line: the key
    ids (never a key) and what to do."""
    said = "this run's host (the process that runs its workflow's code) can't read its worker's answer"
    if not isinstance(error, KeyNotHeld):
        return f"{said}: {error}"
    return (f"{said}: it is encrypted with payload key {error.key_id!r}, which the host doesn't hold "
            f"({held_ids(error.held)}): give the run's workers and its host the same {PAYLOAD_KEY_VARIABLE}, "
            f"or the workers' older key in the host's {PAYLOAD_OLD_KEYS_VARIABLE}")


class PayloadCipher(PayloadCodec):
    """Temporal's payload codec with `keys`: every client and worker of the deployment uses it."""

    def __init__(self, keys: PayloadKeys) -> None:
        self.keys = keys

    async def encode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.keys.encrypt(payload) for payload in payloads]

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        return [self.keys.decrypt(payload) for payload in payloads]


class HostCipher(PayloadCipher, WithSerializationContext):
    """The codec of a worker that runs workflows' code: a worker's answer (an activity's result or
    failure) that doesn't decrypt here ends the run's workflow, failed with `host_refusal`'s reason.

    Why here: Temporal's SDK (1.35, worker/_workflow.py `_handle_activation`) fails only the workflow
    task on a codec's error, logs its traceback and has the task tried again, for ever, since the
    payload in history never changes (sdk-python#321); a non-retryable ApplicationError from the
    same place fails the workflow execution instead: it closes on the server with the reason, its
    result (the failure, encrypted with this host's key) reaches whoever waits on it (`awf run`, `awf
    logs`), and nothing is left running. No watching, polling or terminating from outside is needed,
    so a run hosted by an `awf worker --workflow` whose starter is gone ends the same way.
    Only in an activity's serialization context (the SDK gives one to a `ResolveActivity`'s payloads):
    a person's update or query with another key must not end the run: it fails as before."""

    def __init__(self, keys: PayloadKeys, context: SerializationContext | None = None) -> None:
        super().__init__(keys)
        self.context = context

    def with_context(self, context: SerializationContext) -> Self:
        return type(self)(self.keys, context)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        try:
            return await super().decode(payloads)
        except PayloadKeyError as error:
            if not isinstance(self.context, ActivitySerializationContext):
                raise
            raise ApplicationError(host_refusal(error), type=HOST_REFUSED, non_retryable=True) from None


def hosting(client: Client) -> Client:
    """`client` for a worker that runs workflows' code: its codec a `HostCipher` (the same connection
    and keys). A client given with a converter of its own is as it is."""
    config = client.config()
    converter = config["data_converter"]
    codec = converter.payload_codec
    if type(codec) is not PayloadCipher:
        return client
    config["data_converter"] = dataclasses.replace(converter, payload_codec=HostCipher(codec.keys))
    return Client(**config)


def data_converter(keys: PayloadKeys) -> DataConverter:
    """Temporal's default converter, objects' keys kept in order (payloads.py), with the codec; with a
    key, failures' messages are encrypted too. Without one, the codec still says so when a payload
    comes encrypted."""
    if keys.current_id is None:
        return DataConverter(payload_converter_class=InOrderPayloadConverter, payload_codec=PayloadCipher(keys))
    return DataConverter(payload_converter_class=InOrderPayloadConverter, payload_codec=PayloadCipher(keys),
                         failure_converter_class=DefaultFailureConverterWithEncodedAttributes)


SDK_ACTIVITY_LOGGER = "temporalio.activity"
"""Where Temporal's SDK logs an activity it failed, with the traceback: one whose input didn't decrypt too."""
SDK_WORKFLOW_LOGGER = "temporalio.worker._workflow"
"""Where it logs a workflow task it failed, with the traceback: one a `HostCipher` ended the workflow in too."""


class KeyErrorsInALine(logging.Filter):
    """A filter of the SDK's log: a record of a payload this process can't decrypt (a worker given
    another deployment's payload key) is said as its PayloadKeyError's one line, to `say`, in
    place of the SDK's traceback; a run a `HostCipher` ended, as its reason to `ended` (nothing
    said without it: the run's ending says it); every other record goes by."""

    def __init__(self, say: Callable[[str], None], ended: Callable[[str], None] | None = None) -> None:
        super().__init__()
        self.say = say
        self.ended = ended

    def filter(self, record: logging.LogRecord) -> bool:
        raised = record.exc_info[1] if record.exc_info else None
        if isinstance(raised, ApplicationError) and raised.type == HOST_REFUSED:
            if self.ended is not None:
                self.ended(raised.message)
            return False
        error = key_error_in(raised)
        if error is None:
            return True
        self.say(str(error))
        return False


def key_error_in(error: BaseException | None) -> PayloadKeyError | None:
    """The PayloadKeyError among `error` and its causes (the SDK raises its own error from it), if any."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, PayloadKeyError):
            return error
        seen.add(id(error))
        error = error.__cause__ or error.__context__
    return None


_held: PayloadKeys | None = None


def held_keys() -> PayloadKeys:
    """This process's payload keys, read from its environment at first use (and again when its
    variables are set again), then taken out of it: nothing it starts inherits them. A process
    that holds a key is made non-dumpable, as one that holds the run key is. PayloadKeyError if
    a variable is malformed."""
    global _held
    if _held is None or any(name in os.environ for name in PAYLOAD_VARIABLES):
        keys = PayloadKeys.from_env(os.environ)
        for name in PAYLOAD_VARIABLES:
            os.environ.pop(name, None)
        if keys.current_id is not None:
            no_dump()
        _held = keys
    return _held
