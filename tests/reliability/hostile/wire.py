"""The mix through the endpoint: ``durableq serve`` (SigV4 required) driven by boto3 clients.

:class:`WireQueue` turns a boto3 SQS client into the few Queue methods
:class:`~tests.reliability.journaled.JournaledQueue` calls, so what the
endpoint acknowledged is journaled exactly as a library call would be, and
the checker then reads the database.  An answer the endpoint gave as an error
becomes the DurableQError of its code; no answer at all (the harness killed
the server) is a call cut short, like a call of a killed process.  The
``hostile_client`` role mixes, in each of its threads, sends, receives,
deletes with good, stale and bad handles, changes of visibility, unsigned
``GET /metrics`` scrapes, unsigned SQS requests (refused) and invalid
parameters.  The endpoint itself is :class:`.endpoint.Server`.
"""

from __future__ import annotations

import random
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

import durableq

from ..journal import Journal
from ..journaled import JournaledQueue
from ..roles import Config, role
from . import layout
from .caller import Caller, pick
from .role import Proc, _guard

#: The queues the clients use (the endpoint refuses what large payloads would offload: SQS's rule).
WIRE_CHECKED = (layout.STANDARD, layout.FIFO, layout.SEALED)
KEY_ID, SECRET = "AKIDHOSTILE", "hostile/secret/key/of/the/run"
ACCOUNT = "000000000000"


def _client(url: str, signed: bool = True) -> Any:
    import boto3
    from botocore import UNSIGNED
    from botocore.config import Config as BotoConfig

    options: dict[str, Any] = {"retries": {"total_max_attempts": 1}, "connect_timeout": 5, "read_timeout": 30}
    if not signed:
        options["signature_version"] = UNSIGNED
    return boto3.client(
        "sqs",
        endpoint_url=url,
        region_name="us-east-1",
        aws_access_key_id=KEY_ID,
        aws_secret_access_key=SECRET,
        config=BotoConfig(**options),
    )


def _cut_errors() -> tuple[type[BaseException], ...]:
    """What a call meets when the endpoint is down (killed by the harness, or starting again)."""
    import http.client
    import urllib.error

    from botocore.exceptions import ConnectionClosedError, EndpointConnectionError, ReadTimeoutError

    return (
        EndpointConnectionError,
        ConnectionClosedError,
        ReadTimeoutError,
        ConnectionError,
        urllib.error.URLError,
        http.client.RemoteDisconnected,
        http.client.IncompleteRead,  # killed after the head of an answer left, before its body
    )


@dataclass
class _Sent:
    message_id: str
    sequence_number: str | None


@dataclass
class _Success:
    id: str
    message_id: str = ""
    sequence_number: str | None = None


@dataclass
class _Failure:
    id: str
    code: str
    message: str


@dataclass
class _Batch:
    successful: list[_Success] = field(default_factory=list)
    failed: list[_Failure] = field(default_factory=list)


@dataclass
class _Message:
    message_id: str
    body: str
    receipt_handle: str
    receive_count: int
    sequence_number: str | None
    group_id: str | None


class NoAnswer(ConnectionError):
    """An answer without the fields of a success: an endpoint killed while it answered (botocore
    may read a cut response as an empty success).  A call cut short, like no answer at all."""


def _field(answer: Any, key: str) -> Any:
    if key not in answer:
        raise NoAnswer(f"the answer has no {key}: {answer.get('ResponseMetadata', {})}")
    return answer[key]


def _error(exc: Any) -> durableq.DurableQError:
    """The DurableQError of an endpoint's error answer (its code, whatever the protocol's spelling)."""
    error = exc.response.get("Error", {})
    code = str(error.get("QueryErrorCode") or error.get("Code") or "Unknown").split(".")[-1].split("#")[-1]
    kind = getattr(durableq.errors, code, None)
    if isinstance(kind, type) and issubclass(kind, durableq.DurableQError):
        return kind(str(error.get("Message", "")))
    made = durableq.DurableQError(f"{code}: {error.get('Message', '')}")
    made.code = code
    return made


class WireQueue:
    """The Queue methods JournaledQueue calls, made through the endpoint."""

    def __init__(self, sqs: Any, url: str, name: str) -> None:
        self.sqs = sqs
        self.name = name
        self.fifo = name.endswith(".fifo")
        self.url = f"{url}/{ACCOUNT}/{name}"

    def _do(self, action: str, **params: Any) -> Any:
        from botocore.exceptions import ClientError

        try:
            return getattr(self.sqs, action)(QueueUrl=self.url, **params)
        except ClientError as exc:
            raise _error(exc) from exc

    @staticmethod
    def _options(options: dict[str, Any]) -> dict[str, Any]:
        names = {
            "group_id": "MessageGroupId",
            "deduplication_id": "MessageDeduplicationId",
            "delay_seconds": "DelaySeconds",
        }
        return {names[k]: v for k, v in options.items() if v is not None}

    def send(self, body: str, **options: Any) -> _Sent:
        answer = self._do("send_message", MessageBody=body, **self._options(options))
        return _Sent(_field(answer, "MessageId"), answer.get("SequenceNumber"))

    def send_batch(self, entries: list[durableq.SendEntry]) -> _Batch:
        wire = [
            {
                "Id": e.id,
                "MessageBody": e.body,
                **self._options({"group_id": e.group_id, "delay_seconds": e.delay_seconds}),
            }
            for e in entries
        ]
        answer = self._do("send_message_batch", Entries=wire)
        if "Successful" not in answer and "Failed" not in answer:
            raise NoAnswer("the answer to SendMessageBatch has neither Successful nor Failed")
        return _Batch(
            [
                _Success(s["Id"], s["MessageId"], s.get("SequenceNumber"))
                for s in answer.get("Successful", [])
            ],
            [_Failure(f["Id"], f["Code"], f.get("Message", "")) for f in answer.get("Failed", [])],
        )

    def receive(
        self, max_messages: int = 1, *, visibility_timeout: int, wait_time: int = 0
    ) -> list[_Message]:
        answer = self._do(
            "receive_message",
            MaxNumberOfMessages=max_messages,
            VisibilityTimeout=visibility_timeout,
            WaitTimeSeconds=wait_time,
            MessageSystemAttributeNames=["All"],
        )
        return [
            _Message(
                m["MessageId"],
                m["Body"],
                m["ReceiptHandle"],
                int(m["Attributes"]["ApproximateReceiveCount"]),
                m["Attributes"].get("SequenceNumber"),
                m["Attributes"].get("MessageGroupId"),
            )
            for m in answer.get("Messages", [])
        ]

    def delete(self, receipt_handle: str) -> None:
        self._do("delete_message", ReceiptHandle=receipt_handle)

    def delete_batch(self, handles: list[str]) -> _Batch:
        answer = self._do(
            "delete_message_batch",
            Entries=[{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(handles)],
        )
        return _Batch(
            [_Success(s["Id"]) for s in answer.get("Successful", [])],
            [_Failure(f["Id"], f["Code"], f.get("Message", "")) for f in answer.get("Failed", [])],
        )

    def change_visibility(self, receipt_handle: str, timeout: int) -> None:
        self._do("change_message_visibility", ReceiptHandle=receipt_handle, VisibilityTimeout=timeout)


class WireHand(Caller):
    """One client thread: a signed boto3 client and an unsigned one, on the endpoint at ``url``."""

    def __init__(self, proc: Proc, rng: random.Random, tag: str, url: str) -> None:
        super().__init__(proc.journal, proc.busy)
        self.cut = _cut_errors()
        self.rng, self.tag, self.url, self.sent = rng, tag, url, 0
        self.sqs, self.unsigned = _client(url), _client(url, signed=False)
        self.checked = {
            name: JournaledQueue(WireQueue(self.sqs, url, name), proc.journal, layout.VISIBILITY)  # type: ignore[arg-type]
            for name in WIRE_CHECKED
        }
        self.raw = {name: WireQueue(self.sqs, url, name) for name in WIRE_CHECKED}
        self.held: list[tuple[str, str]] = []
        self.old: list[tuple[str, str]] = []
        self.table = [
            (20, self.send),
            (6, self.send_batch),
            (10, self.receive),
            (8, self.delete_held),
            (3, self.delete_batch_held),
            (3, self.change_held),
            (12, self.stale_delete),  # a failing write inside the endpoint's group commit
            (4, self.bad_delete),
            (10, self.scrape),  # a read beside it
            (3, self.read),
            (2, self.unsigned_call),
            (2, self.invalid),
        ]

    def step(self) -> None:
        pick(self.rng, self.table)()

    def body(self) -> str:
        self.sent += 1
        return f"{self.tag}.{self.sent}"

    def _options(self, name: str) -> dict[str, Any]:
        if name == layout.FIFO:
            return {"group_id": self.rng.choice(layout.GROUPS)}
        tenant = {"group_id": self.rng.choice(("t1", "t2", "t3"))} if self.rng.random() < 0.5 else {}
        return {"delay_seconds": 1, **tenant} if self.rng.random() < 0.1 else tenant

    def send(self) -> None:
        name = self.rng.choice(WIRE_CHECKED)
        body = self.body()
        self.call("wire.send", lambda: self.checked[name].send(body, **self._options(name)), judged=True)

    def send_batch(self) -> None:
        name = self.rng.choice(WIRE_CHECKED)
        entries = [
            durableq.SendEntry(str(i), self.body(), **self._options(name))
            for i in range(self.rng.randint(2, 10))
        ]
        result = self.call("wire.send_batch", lambda: self.checked[name].send_batch(entries), judged=True)
        if result is not None:
            self.check("wire.send_batch", not result.failed, f"entries failed: {result.failed}")

    def receive(self) -> None:
        name = self.rng.choice(WIRE_CHECKED)
        got = self.call(
            "wire.receive",
            lambda: self.checked[name].receive(
                self.rng.randint(1, 10),
                visibility_timeout=self.rng.choice([1, 2, 3]),
                wait_time=self.rng.choice([0, 1]),
            ),
            judged=True,
        )
        self.held += [(name, m.receipt_handle) for m in got or []]
        while len(self.held) > 30:
            self._retire(self.held.pop(0))

    def _retire(self, held: tuple[str, str]) -> None:
        self.old.append(held)
        del self.old[:-50]

    def _take(self) -> tuple[str, str] | None:
        if not self.held:
            return None
        held = self.held.pop(self.rng.randrange(len(self.held)))
        self._retire(held)
        return held

    def delete_held(self) -> None:
        held = self._take()
        if held is not None:
            self.call("wire.delete", lambda: self.checked[held[0]].delete(held[1]), judged=True)

    def delete_batch_held(self) -> None:
        name = self.rng.choice(WIRE_CHECKED)
        mine = [h for q, h in self.held if q == name][:10]
        if mine:
            self.held = [(q, h) for q, h in self.held if h not in mine]
            for handle in mine:
                self._retire((name, handle))
            self.call("wire.delete_batch", lambda: self.checked[name].delete_batch(mine), judged=True)

    def change_held(self) -> None:
        held = self._take()
        if held is not None:
            timeout = self.rng.choice([0, 1, 3])
            self.call(
                "wire.change_visibility",
                lambda: self.checked[held[0]].change_visibility(held[1], timeout),
                judged=True,
            )

    def stale_delete(self) -> None:
        if self.old:
            name, handle = self.rng.choice(self.old)
            self.call("wire.delete.stale", lambda: self.checked[name].delete(handle), judged=True)

    def bad_delete(self) -> None:
        queue = self.raw[self.rng.choice(WIRE_CHECKED)]
        handle = self.rng.choice(["bad handle", "AQEB" + "x" * 100, "0" * 40])
        refused = ["ReceiptHandleIsInvalid", "InvalidParameterValue"]
        self.call("wire.delete.bad", lambda: queue.delete(handle), refused, fail=True)

    def scrape(self) -> None:
        def get() -> None:
            with urllib.request.urlopen(f"{self.url}/metrics", timeout=30) as answer:
                answer.read()

        self.call("wire.metrics", get)

    def read(self) -> None:
        queue = self.raw[self.rng.choice(WIRE_CHECKED)]
        self.call("wire.list_queues", lambda: self.sqs.list_queues())
        self.call(
            "wire.get_queue_attributes", lambda: queue._do("get_queue_attributes", AttributeNames=["All"])
        )

    def unsigned_call(self) -> None:
        from botocore.exceptions import ClientError

        def attempt() -> None:
            try:
                self.unsigned.send_message(
                    QueueUrl=self.raw[layout.STANDARD].url, MessageBody=f"{self.body()}.never"
                )
            except ClientError as exc:
                raise _error(exc) from exc

        self.call(
            "wire.unsigned_send",
            attempt,
            [
                "MissingAuthenticationToken",
                "InvalidClientTokenId",
                "AccessDenied",
                "IncompleteSignature",
                "InvalidSecurity",
                "SignatureDoesNotMatch",
                "MissingAuthenticationTokenException",
            ],
            fail=True,
        )

    def invalid(self) -> None:
        queue = self.raw[layout.STANDARD]
        body = f"{self.body()}.never"
        self.call(
            "wire.send.invalid",
            lambda: queue._do("send_message", MessageBody=body, DelaySeconds=-1),
            ["InvalidParameterValue"],
            fail=True,
        )


@role
def hostile_client(config: Config, journal: Journal) -> None:
    journal.write("start", role="hostile-client", pid=0, receives_from=list(WIRE_CHECKED))
    _guard(journal)
    proc = Proc(config, journal)
    import threading

    def loop(index: int) -> None:
        hand = WireHand(proc, random.Random(proc.seed()), f"{journal.path.stem}.w{index}", config["url"])
        hand.cut_errors = hand.cut
        while proc.until is None or time.time() < proc.until:
            hand.step()

    def scraper() -> None:
        """Unsigned GET /metrics again and again, as a too eager Prometheus server would."""
        hand = WireHand(proc, random.Random(proc.seed()), f"{journal.path.stem}.m", config["url"])
        hand.cut_errors = hand.cut
        while proc.until is None or time.time() < proc.until:
            hand.scrape()
            time.sleep(0.01)

    threading.Thread(target=proc.watchdog, name="watchdog", daemon=True).start()
    threads = [
        threading.Thread(target=loop, args=(i,), name=f"client-{i}") for i in range(config.get("threads", 4))
    ]
    threads.append(threading.Thread(target=scraper, name="scraper"))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
