"""SigV4 verification: with --credentials, only requests signed with a known secret, recently, get in."""

from __future__ import annotations

import datetime
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

from .conftest import KEY_ID, REGION, SECRET, ServerProcess, client, error_of


@pytest.fixture(scope="module")
def signed_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    folder = tmp_path_factory.mktemp("signed")
    keys = folder / "credentials"
    keys.write_text(f"# access key id, secret\n{KEY_ID} {SECRET}\n\nAKIDOTHER other-secret\n")
    with ServerProcess(folder / "queues.db", "--credentials", str(keys)) as running:
        yield running


def send(request: AWSRequest) -> tuple[int, bytes]:
    prepared = request.prepare()
    raw = urllib.request.Request(
        prepared.url, data=prepared.body, headers=dict(prepared.headers), method=prepared.method
    )
    try:
        with urllib.request.urlopen(raw, timeout=30) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def signed_query(url: str, body: str, secret: str = SECRET, method: str = "POST") -> AWSRequest:
    """A query-protocol request signed by botocore's signer (as an older SDK would send it)."""
    if method == "GET":
        request = AWSRequest(method="GET", url=f"{url}/?{body}")
    else:
        request = AWSRequest(
            method="POST",
            url=url,
            data=body.encode(),
            headers={"Content-Type": "application/x-www-form-urlencoded; charset=utf-8"},
        )
    SigV4Auth(Credentials(KEY_ID, secret), "sqs", REGION).add_auth(request)
    return request


def test_the_right_key_gets_in_with_both_protocols(signed_server: ServerProcess) -> None:
    sqs = client(signed_server.url, KEY_ID, SECRET)
    url = sqs.create_queue(QueueName="signed")["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="hello")
    assert client(signed_server.url, "AKIDOTHER", "other-secret").receive_message(QueueUrl=url)["Messages"]
    for method in ("POST", "GET"):
        status, body = send(
            signed_query(signed_server.url, "Action=ListQueues&QueueNamePrefix=sig%20ned", method=method)
        )
        assert status == 200, body


@pytest.mark.parametrize(
    ("key_id", "secret", "code"),
    [(KEY_ID, "wrong-secret", "SignatureDoesNotMatch"), ("AKIDUNKNOWN", SECRET, "InvalidClientTokenId")],
)
def test_a_wrong_secret_or_unknown_key_is_refused(
    signed_server: ServerProcess, key_id: str, secret: str, code: str
) -> None:
    sqs = client(signed_server.url, key_id, secret)
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.list_queues()
    assert error_of(refused)[0] == code and error_of(refused)[2] == 403


def test_a_stale_signature_is_refused(signed_server: ServerProcess, monkeypatch: pytest.MonkeyPatch) -> None:
    sqs = client(signed_server.url, KEY_ID, SECRET)
    stale = datetime.datetime.now(datetime.UTC).replace(tzinfo=None) - datetime.timedelta(minutes=16)
    monkeypatch.setattr("botocore.auth.get_current_datetime", lambda *args, **kwargs: stale)
    with pytest.raises(sqs.exceptions.ClientError) as refused:
        sqs.list_queues()
    assert error_of(refused)[0] == "SignatureDoesNotMatch" and error_of(refused)[2] == 403
    assert "expired" in refused.value.response["Error"]["Message"]


def test_unsigned_and_tampered_requests_are_refused(signed_server: ServerProcess) -> None:
    status, body = send(AWSRequest(method="POST", url=signed_server.url, data=b"Action=ListQueues"))
    assert status == 403 and b"MissingAuthenticationToken" in body
    tampered = signed_query(signed_server.url, "Action=CreateQueue&QueueName=mine")
    tampered.data = b"Action=CreateQueue&QueueName=evil"
    status, body = send(tampered)
    assert status == 403 and b"SignatureDoesNotMatch" in body
    assert "evil" not in str(client(signed_server.url, KEY_ID, SECRET).list_queues())


def test_the_credentials_file_is_checked(tmp_path: Path) -> None:
    from durableq.server import load_credentials

    good = tmp_path / "good"
    good.write_text("A B\n# comment\n")
    assert load_credentials(good) == {"A": "B"}
    bad = tmp_path / "bad"
    bad.write_text("only-one-field\n")
    with pytest.raises(ValueError, match="line 1"):
        load_credentials(bad)
