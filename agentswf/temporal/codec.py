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

A person's command (`awf approve`, `awf stop`, `awf send`...) sent with a key other than the run's
is refused, and the run goes on as if it was never sent, at two depths:
- the command first reads which key the run's host encrypts with (the key id on a query's answer,
  read without decrypting: `without_codec`, `key_id_of`) and sends nothing unless it is the key the
  command encrypts with (`command_refused`). A command without a key was otherwise taken as it is
  (plaintext passes, for runs from before the key) and done, and then failed to read the answer:
  the person was told it failed, the run had changed (measured: an `awf approve` approved).
- the host never fails a workflow task for an update it can't decrypt (a command encrypted with a
  key the host doesn't hold, a newer one, say; or anything sent with another key straight to the
  frontend). Temporal's SDK (1.35) decodes a whole activation before the workflow sees it and fails
  the task on a codec error, so the update was tried again, the workflow task in a failed state,
  until the client gave up (about 20 s, then a traceback of `WorkflowNotReadyFailure`), every
  other event of the run waiting meanwhile. A `HostCipher` instead hands such a payload on as
  `UNREADABLE`, which only `HostPayloadConverter` takes, raising `Unreadable`: the SDK converts an
  update's argument before its validator, and a failure there rejects the update (worker/
  _workflow_instance.py `_apply_do_update`; sdk-dotnet#142 chose the same: "prevent acceptance on
  invalid args"). A rejected update leaves nothing in the history. A run's start the host can't read
  fails its workflow task as before (`Failed decoding arguments`), so a host with the key takes it.
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
from typing import Any, Self

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from temporalio.api.common.v1 import Payload
from temporalio.client import Client
from temporalio.converter import (
    ActivitySerializationContext,
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    EncodingPayloadConverter,
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
UNREADABLE = b"binary/agentswf-unreadable"  # a payload a run's host couldn't decrypt, handed on in its place
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
        key_id = key_id_of(payload)
        if key_id is None:
            return payload
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


def key_id_of(payload: Payload) -> str | None:
    """The id of the payload key `payload` is encrypted with (as its metadata says); None if it isn't."""
    if payload.metadata.get(ENCODING_KEY) != ENCRYPTED:
        return None
    return payload.metadata.get(KEY_ID_KEY, b"").decode(errors="replace")[:KEY_ID_CHARS]


def host_refusal(error: PayloadKeyError) -> str:
    """Why a run's workflow ended when its host couldn't decrypt a worker's answer, in a line: the key
    ids (never a key) and what to do."""
    said = "this run's host (the process that runs its workflow's code) can't read its worker's answer"
    if not isinstance(error, KeyNotHeld):
        return f"{said}: {error}"
    return (f"{said}: it is encrypted with payload key {error.key_id!r}, which the host doesn't hold "
            f"({held_ids(error.held)}): give the run's workers and its host the same {PAYLOAD_KEY_VARIABLE}, "
            f"or the workers' older key in the host's {PAYLOAD_OLD_KEYS_VARIABLE}")


def cant_read(error: PayloadKeyError) -> str:
    """Why a run's host refused what was sent to its workflow (a person's command, a start), in a line."""
    said = "this run's host can't read it"
    if not isinstance(error, KeyNotHeld):
        return f"{said}: {error}"
    return (f"{said}: it is encrypted with payload key {error.key_id!r}, which the host doesn't hold "
            f"({held_ids(error.held)}): give the host and whoever sends to the run the same {PAYLOAD_KEY_VARIABLE}")


def command_refused(host_key: str | None, keys: PayloadKeys) -> str | None:
    """Why a person's command with `keys` is not sent to a run whose host encrypts with the key `host_key`
    (None: with none), in a line; None where the two encrypt alike, so each reads the other."""
    if host_key == keys.current_id:
        return None
    if host_key is None:
        return (f"refused, nothing was sent: this run's host has no payload key, and this command encrypts with "
                f"payload key {keys.current_id!r}: run it without {PAYLOAD_KEY_VARIABLE}, or give the host that key")
    mine = f"encrypts with payload key {keys.current_id!r}" if keys.current_id else f"has no payload key ({PAYLOAD_KEY_VARIABLE})"
    return (f"refused, nothing was sent: this run's host encrypts with payload key {host_key!r}, and this command "
            f"{mine}: give the command the host's {PAYLOAD_KEY_VARIABLE}")


class Unreadable(PayloadKeyError):
    """An `UNREADABLE` payload, met where the workflow converts it: its message is `cant_read`'s."""


class UnreadableConverter(EncodingPayloadConverter):
    """Converts no value to a payload; an `UNREADABLE` payload to the `Unreadable` it stands for."""

    @property
    def encoding(self) -> str:
        return UNREADABLE.decode()

    def to_payload(self, value: Any) -> Payload | None:
        return None

    def from_payload(self, payload: Payload, type_hint: type | None = None) -> Any:
        raise Unreadable(payload.data.decode(errors="replace"))


class HostPayloadConverter(CompositePayloadConverter):
    """A run's host's payload converter: `InOrderPayloadConverter`'s, and `UnreadableConverter`."""

    def __init__(self) -> None:
        super().__init__(*InOrderPayloadConverter().converters.values(), UnreadableConverter())


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
    Only in an activity's serialization context (the SDK gives one to a `ResolveActivity`'s payloads).
    In the workflow's (an update's or a query's argument, the run's start), a payload it can't decrypt
    is handed on `UNREADABLE`, saying why: the update is rejected, the query fails (module docstring)."""

    def __init__(self, keys: PayloadKeys, context: SerializationContext | None = None) -> None:
        super().__init__(keys)
        self.context = context

    def with_context(self, context: SerializationContext) -> Self:
        return type(self)(self.keys, context)

    async def decode(self, payloads: Sequence[Payload]) -> list[Payload]:
        if not isinstance(self.context, ActivitySerializationContext):
            return [self._decrypted_or_unreadable(payload) for payload in payloads]
        try:
            return await super().decode(payloads)
        except PayloadKeyError as error:
            raise ApplicationError(host_refusal(error), type=HOST_REFUSED, non_retryable=True) from None

    def _decrypted_or_unreadable(self, payload: Payload) -> Payload:
        try:
            return self.keys.decrypt(payload)
        except PayloadKeyError as error:
            return Payload(metadata={ENCODING_KEY: UNREADABLE}, data=cant_read(error).encode())


def hosting(client: Client) -> Client:
    """`client` for a worker that runs workflows' code: its codec a `HostCipher`, its payload converter
    a `HostPayloadConverter` (the same connection and keys). A client given with a converter of its
    own is as it is."""
    config = client.config()
    converter = config["data_converter"]
    codec = converter.payload_codec
    if type(codec) is not PayloadCipher:
        return client
    config["data_converter"] = dataclasses.replace(
        converter, payload_codec=HostCipher(codec.keys), payload_converter_class=HostPayloadConverter
    )
    return Client(**config)


def without_codec(client: Client) -> Client:
    """`client` reading payloads as Temporal holds them (the same connection): a key's id in their metadata."""
    config = client.config()
    config["data_converter"] = dataclasses.replace(config["data_converter"], payload_codec=None)
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
SDK_INSTANCE_LOGGER = "temporalio.worker._workflow_instance"
"""Where it logs a workflow task the workflow's code failed: one whose start was `UNREADABLE` too."""
SDK_WORKFLOW_LOGGERS = (SDK_WORKFLOW_LOGGER, SDK_INSTANCE_LOGGER)


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


def unreadable_in(error: BaseException | None) -> str | None:
    """What a run's host said of a payload it couldn't read (`Unreadable`), if `error` (an update's
    rejection, as a client reads it: the SDK's `Failed decoding arguments` caused by it) holds it."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        if isinstance(error, ApplicationError) and error.type == Unreadable.__name__:
            return error.message
        seen.add(id(error))
        error = error.__cause__
    return None


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
