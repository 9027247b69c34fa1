"""Running the endpoint: one access-log line per request (text or JSON), and HTTPS (--tls-cert, --tls-key)."""

from __future__ import annotations

import datetime
import http.client
import ipaddress
import json
import logging
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from durableq.server import serve

from .conftest import ServerProcess, client


def test_one_access_line_per_request(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="durableq.server.access")
    with serve(tmp_path / "q.db", port=0) as server:
        sqs = client(server.url)
        url = sqs.create_queue(QueueName="logged")["QueueUrl"]
        sqs.send_message(QueueUrl=url, MessageBody="x")
        with pytest.raises(sqs.exceptions.QueueDoesNotExist):
            sqs.get_queue_url(QueueName="missing")
    lines = [r for r in caplog.records if r.name == "durableq.server.access"]
    assert [(r.access["action"], r.access["queue"], r.access["status"]) for r in lines] == [  # type: ignore[attr-defined]
        ("CreateQueue", "logged", 200),
        ("SendMessage", "logged", 200),
        ("GetQueueUrl", "missing", 400),
    ]
    assert "AWS.SimpleQueueService.NonExistentQueue" in lines[-1].getMessage()
    assert all(r.access["duration_ms"] >= 0 and r.access["request_id"] for r in lines)  # type: ignore[attr-defined]


def test_json_log_lines(tmp_path: Path) -> None:
    with ServerProcess(tmp_path / "q.db", "--log-level", "info", "--log-format", "json") as running:
        client(running.url).create_queue(QueueName="json-logged")
        stderr = running.stop()
    records = [json.loads(line) for line in stderr.splitlines() if line.strip()]
    [access] = [r for r in records if r["logger"] == "durableq.server.access"]
    assert access["action"] == "CreateQueue" and access["queue"] == "json-logged" and access["status"] == 200
    assert {"time", "level", "duration_ms", "request_id", "client", "method"} <= set(access)


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key, as PEM files."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_file, key_file


def test_https(tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    with ServerProcess(tmp_path / "q.db", "--tls-cert", str(cert), "--tls-key", str(key)) as running:
        assert running.url.startswith("https://127.0.0.1:")
        sqs = client(running.url, verify=str(cert))
        url = sqs.create_queue(QueueName="secure")["QueueUrl"]
        assert url == f"{running.url}/000000000000/secure"
        sqs.send_message(QueueUrl=url, MessageBody="over TLS")
        assert sqs.receive_message(QueueUrl=url)["Messages"][0]["Body"] == "over TLS"
        plain = http.client.HTTPConnection("127.0.0.1", int(running.url.rsplit(":", 1)[1]), timeout=30)
        with pytest.raises((http.client.HTTPException, ConnectionError)):  # plain HTTP gets nowhere
            plain.request("POST", "/", body=b"Action=ListQueues")
            plain.getresponse()
        plain.close()
