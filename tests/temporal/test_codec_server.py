"""`awf codec-server` over real HTTP: Temporal's codec protocol (/encode, /decode in protobuf's JSON),
CORS for the Web UI's origin, and refusals of what a browser page of another origin, or one
that rebound its name to loopback, would send."""

from __future__ import annotations

import base64
import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

pytest.importorskip("temporalio", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")
pytest.importorskip("cryptography", reason="agentswf[temporal] is not installed (pip install -e '.[temporal]')")

from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads

from agentswf.temporal.codec import PayloadKeys

KEY = base64.b64encode(bytes(range(32))).decode()
UI = "http://localhost:8233"


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    """An `awf codec-server` on a free port, with KEY; stopped (SIGTERM) after the module."""
    env = {**os.environ, "AGENTSWF_PAYLOAD_KEY": KEY, "XDG_CONFIG_HOME": str(tmp_path_factory.mktemp("config"))}
    server = subprocess.Popen([sys.executable, "-m", "agentswf", "codec-server", "--port", "0"], env=env,
                              stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, start_new_session=True)
    assert server.stderr is not None
    line = server.stderr.readline()
    assert line.startswith("awf: codec server on http://127.0.0.1:"), line
    assert f"for {UI}, http://127.0.0.1:8233, payload keys {PayloadKeys(bytes(range(32))).current_id}" in line
    try:
        yield int(line.split()[4].rsplit(":", 1)[1])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        assert server.wait(10) == 0
        assert server.stderr.read() == "awf: codec server stopped\n"
        server.stderr.close()


def ask(port: int, method: str, path: str, body: bytes = b"", **headers: str) -> tuple[int, dict[str, str], bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.request(method, path, body=body, headers={"Content-Type": "application/json", **headers})
        response = connection.getresponse()
        return response.status, {name.lower(): value for name, value in response.getheaders()}, response.read()
    finally:
        connection.close()


def as_json(*payloads: Payload) -> bytes:
    return json_format.MessageToJson(Payloads(payloads=list(payloads))).encode()


def from_json(body: bytes) -> list[Payload]:
    return list(json_format.Parse(body, Payloads()).payloads)


def plain(value: object) -> Payload:
    return Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(value).encode())


def test_decode_gives_what_was_encrypted_and_passes_the_rest(port: int) -> None:
    sealed = PayloadKeys(bytes(range(32))).encrypt(plain({"prompt": "the secret"}))
    status, headers, body = ask(port, "POST", "/decode", as_json(sealed, plain("as it was")), Origin=UI)
    assert status == 200 and headers["content-type"] == "application/json"
    assert from_json(body) == [plain({"prompt": "the secret"}), plain("as it was")]
    assert headers["access-control-allow-origin"] == UI and headers["access-control-allow-credentials"] == "true"


def test_encode_then_decode_is_the_same_payload_and_a_namespace_prefix_is_taken(port: int) -> None:
    status, _, encoded = ask(port, "POST", "/default/encode", as_json(plain("typed in the UI")))
    assert status == 200
    [sealed] = from_json(encoded)
    assert sealed.metadata["encoding"] == b"binary/encrypted" and b"typed in the UI" not in sealed.data
    status, _, decoded = ask(port, "POST", "/default/decode", encoded, **{"X-Namespace": "default"})
    assert status == 200 and from_json(decoded) == [plain("typed in the UI")]


def test_the_web_uis_preflight_is_answered_with_cors(port: int) -> None:
    status, headers, _ = ask(port, "OPTIONS", "/decode", Origin=UI, **{
        "Access-Control-Request-Method": "POST", "Access-Control-Request-Headers": "content-type,x-namespace",
    })
    assert status == 204
    assert headers["access-control-allow-origin"] == UI
    assert "POST" in headers["access-control-allow-methods"]
    assert "x-namespace" in headers["access-control-allow-headers"]


def test_another_origin_or_a_rebound_name_is_refused(port: int) -> None:
    sealed = as_json(PayloadKeys(bytes(range(32))).encrypt(plain("the secret")))
    for headers in ({"Origin": "http://evil.example"}, {"Host": f"evil.example:{port}"}):
        status, answered, body = ask(port, "POST", "/decode", sealed, **headers)
        assert status == 403 and b"the secret" not in body and "access-control-allow-origin" not in answered


def test_what_it_cant_do_is_said_not_crashed_on(port: int) -> None:
    stranger = PayloadKeys(os.urandom(32)).encrypt(plain("not ours"))
    status, _, body = ask(port, "POST", "/decode", as_json(stranger))
    assert status == 400 and b"which this process doesn't hold" in body
    assert ask(port, "POST", "/decode", b"{not json")[0] == 400
    assert ask(port, "POST", "/decode", b"", **{"Content-Length": "-1"})[0] == 400
    assert ask(port, "POST", "/decode", b"", **{"Content-Length": str(1 << 40)})[0] == 413
    assert ask(port, "POST", "/metrics", b"{}")[0] == 404
    assert ask(port, "POST", "/decode", as_json())[0] == 200  # and it still serves
