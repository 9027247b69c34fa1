"""SigV4 verification: with --credentials, only requests signed with a known secret, recently, get in."""

from __future__ import annotations

import datetime
import json
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


def signed_json(
    url: str, action: str, members: str, sign_after: dict[str, str], service: str = "sqs"
) -> AWSRequest:
    """A JSON request signed by botocore, with ``sign_after`` headers added once it is signed."""
    request = AWSRequest(method="POST", url=url, data=members.encode())
    request.headers["X-Amz-Target"] = f"AmazonSQS.{action}"
    request.headers["Content-Type"] = "application/x-amz-json-1.0"
    for header in sign_after:
        del request.headers[header]
    SigV4Auth(Credentials(KEY_ID, SECRET), service, REGION).add_auth(request)
    for header, value in sign_after.items():
        request.headers[header] = value
    return request


def queue_with_a_message(server: ServerProcess, name: str) -> str:
    sqs = client(server.url, KEY_ID, SECRET)
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    sqs.send_message(QueueUrl=url, MessageBody="keep me")
    return url


def depth(server: ServerProcess, url: str) -> str:
    attributes = client(server.url, KEY_ID, SECRET).get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
    )
    return attributes["Attributes"]["ApproximateNumberOfMessages"]  # type: ignore[no-any-return]


def test_a_signature_must_cover_the_action(signed_server: ServerProcess) -> None:
    """A captured GetQueueAttributes replayed as PurgeQueue (X-Amz-Target unsigned) is refused."""
    url = queue_with_a_message(signed_server, "replayed")
    members = json.dumps({"QueueUrl": url})
    replay = signed_json(
        signed_server.url, "GetQueueAttributes", members, {"X-Amz-Target": "AmazonSQS.PurgeQueue"}
    )
    status, body = send(replay)
    assert status == 403 and b"SignatureDoesNotMatch" in body and b"x-amz-target" in body
    assert depth(signed_server, url) == "1"


def test_a_signature_must_cover_the_content_type(signed_server: ServerProcess) -> None:
    request = signed_json(
        signed_server.url, "ListQueues", "{}", {"Content-Type": "application/x-amz-json-1.0"}
    )
    status, body = send(request)
    assert status == 403 and b"content-type" in body


def test_the_payload_hash_must_be_the_bodys(signed_server: ServerProcess) -> None:
    request = AWSRequest(method="POST", url=signed_server.url, data=b"{}")
    request.headers["X-Amz-Target"] = "AmazonSQS.ListQueues"
    request.headers["Content-Type"] = "application/x-amz-json-1.0"
    request.headers["X-Amz-Content-SHA256"] = "0" * 64  # signed, but not the hash of the body
    SigV4Auth(Credentials(KEY_ID, SECRET), "sqs", REGION).add_auth(request)
    status, body = send(request)
    assert status == 400 and b"XAmzContentSHA256Mismatch" in body


def test_a_signature_for_another_service_is_refused(signed_server: ServerProcess) -> None:
    status, body = send(signed_json(signed_server.url, "ListQueues", "{}", {}, service="s3"))
    assert status == 403 and b"SignatureDoesNotMatch" in body


def test_binding_beyond_loopback_without_credentials_warns(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--host", "0.0.0.0") as running:  # listens only; no traffic leaves
        stderr = running.stop()
    assert "WARNING" in stderr and "without credentials" in stderr
    with ServerProcess(tmp_path / "q.db") as running:
        assert "without credentials" not in running.stop()
