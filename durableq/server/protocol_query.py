"""The query protocol of older SDKs: form-encoded ``Action=...`` requests, XML responses.

Requests are converted to the AWS JSON shape the actions take: ``Attribute.1.Name``
/ ``Attribute.1.Value`` pairs become the ``Attributes`` map, ``AttributeName.1``
the ``AttributeNames`` list, and so on.  Results are rendered back with the
element names of the query API (``<Attribute><Name/><Value/></Attribute>``,
flattened lists of ``<Message>``, ``<QueueUrl>``, ...).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl
from xml.etree import ElementTree

from durableq.errors import InvalidParameterValue

from .errors import WireError
from .settings import HEALTH_PATH
from .wire import Request, Response

NAMESPACE = "http://queue.amazonaws.com/doc/2012-11-05/"
CONTENT_TYPE = "text/xml"
# Query parameter prefix -> JSON member.
_MEMBERS = {
    "Attribute": "Attributes",
    "AttributeName": "AttributeNames",
    "MessageAttribute": "MessageAttributes",
    "MessageAttributeName": "MessageAttributeNames",
    "MessageSystemAttribute": "MessageSystemAttributes",
    "MessageSystemAttributeName": "MessageSystemAttributeNames",
    "StringListValue": "StringListValues",
    "BinaryListValue": "BinaryListValues",
    "Tag": "Tags",
    "TagKey": "TagKeys",
    "AWSAccountId": "AWSAccountIds",
    "ActionName": "Actions",
    "SendMessageBatchRequestEntry": "Entries",
    "DeleteMessageBatchRequestEntry": "Entries",
    "ChangeMessageVisibilityBatchRequestEntry": "Entries",
}
# The JSON names of list and map members, which an empty list or map may be sent as.
_LIST_MEMBERS = frozenset(_MEMBERS.values())
# JSON list member -> the element of each item (flattened lists).
_ITEMS = {
    "QueueUrls": "QueueUrl",
    "queueUrls": "QueueUrl",
    "Messages": "Message",
    "Failed": "BatchResultErrorEntry",
    "Results": "ListMessageMoveTasksResultEntry",
}
# JSON map member -> (element of each entry, key element); the value is always <Value>.
_MAPS = {
    "Attributes": ("Attribute", "Name"),
    "MessageAttributes": ("MessageAttribute", "Name"),
    "Tags": ("Tag", "Key"),
}
#: Actions whose answer holds no result element, only ResponseMetadata (SQS's query API declares
#: no output for them); every other action always has its ``<ActionResult>``, empty or not.
NO_RESULT = frozenset(
    {
        "AddPermission",
        "ChangeMessageVisibility",
        "DeleteMessage",
        "DeleteQueue",
        "PurgeQueue",
        "RemovePermission",
        "SetQueueAttributes",
        "TagQueue",
        "UntagQueue",
    }
)
#: The deepest parameter name of the API:
#: SendMessageBatchRequestEntry.1.MessageAttribute.1.Value.StringListValue.1.
MAX_NAME_PARTS = 8
# Parameters of the request itself, not of the action (SigV2 fields are ignored).
_ENVELOPE = {
    "Action",
    "Version",
    "AWSAccessKeyId",
    "SignatureVersion",
    "SignatureMethod",
    "Signature",
    "Timestamp",
}


def parse(request: Request) -> tuple[str, dict[str, Any]]:
    """The action and its members, from the URL's query string and the form body."""
    try:
        # errors="strict": "%FF%FE" is refused, not stored as U+FFFD.
        pairs = parse_qsl(request.query, keep_blank_values=True, errors="strict")
        if request.body:
            pairs += parse_qsl(
                request.body.decode("utf-8"), keep_blank_values=True, strict_parsing=True, errors="strict"
            )
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError("MalformedQueryString", f"the request is not a form-encoded query: {exc}") from exc
    action = dict(pairs).get("Action")
    if not action:
        # Often a person or a probe at the endpoint's root: say where its health check is.
        raise WireError(
            "MissingAction", f"the request names no Action (whether the endpoint serves: GET {HEALTH_PATH})"
        )
    members = _shape(_nest([(k, v) for k, v in pairs if k not in _ENVELOPE]))
    if not isinstance(members, dict):  # only numbered names ("1=x"): no parameter of any action
        raise WireError("MalformedQueryString", "the request's parameters must be named, not only numbered")
    if action == "CreateQueue" and "Tags" in members:
        members["tags"] = members.pop("Tags")  # CreateQueue's member is lower-case, TagQueue's is not
    return action, members


def _nest(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for key, value in pairs:
        node = root
        *path, last = key.split(".")
        if len(path) >= MAX_NAME_PARTS:
            raise InvalidParameterValue(f"parameter {key[:100]!r} is nested deeper than any SQS parameter")
        for part in path:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InvalidParameterValue(f"parameter {key!r} conflicts with another parameter")
        node[last] = value
    return root


def _shape(node: Any) -> Any:
    """Numbered members become lists, and lists of Name/Key-Value pairs become maps."""
    if not isinstance(node, dict):
        return node
    # SDKs send an empty list or map as a bare name with no value, the query name or the member's own
    # (botocore: ``AttributeNames=``; the JavaScript SDK: ``AttributeName=``): absent is empty.
    node = {
        _MEMBERS.get(key, key): _shape(value)
        for key, value in node.items()
        if not (value == "" and (key in _MEMBERS or key in _LIST_MEMBERS))
    }
    if not node or not all(key.isascii() and key.isdigit() for key in node):  # "²".isdigit() too
        return node
    items = [node[key] for key in sorted(node, key=int)]
    if all(
        isinstance(i, dict)
        and isinstance(i.get("Name", i.get("Key")), str)  # a map's keys are text (Name.1.x=... is not)
        and set(i) <= {"Name", "Key", "Value"}
        for i in items
    ):
        return {item.get("Name", item.get("Key")): item.get("Value") for item in items}
    return items


def result(action: str, members: dict[str, Any], request_id: str) -> Response:
    root = ElementTree.Element(f"{action}Response", xmlns=NAMESPACE)
    if action not in NO_RESULT:
        body = ElementTree.SubElement(root, f"{action}Result")
        for name, value in members.items():
            _render(body, name, value, action)
    _request_id(root, "ResponseMetadata", request_id)
    return Response(200, _xml(root), {"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": request_id})


def error(err: WireError, request_id: str) -> Response:
    root = ElementTree.Element("ErrorResponse", xmlns=NAMESPACE)
    detail = ElementTree.SubElement(root, "Error")
    for name, text in (("Type", err.fault), ("Code", err.code), ("Message", err.query_message)):
        ElementTree.SubElement(detail, name).text = text
    ElementTree.SubElement(detail, "Detail")
    ElementTree.SubElement(root, "RequestId").text = request_id
    return Response(err.status, _xml(root), {"Content-Type": CONTENT_TYPE, "x-amzn-RequestId": request_id})


def _render(parent: ElementTree.Element, name: str, value: Any, action: str) -> None:
    if isinstance(value, list):
        item = _ITEMS.get(name) or f"{action}ResultEntry"  # the Successful entries of a batch
        for each in value:
            _render(parent, item, each, action)
    elif isinstance(value, dict) and name in _MAPS:
        element, key_name = _MAPS[name]
        for key, each in value.items():
            entry = ElementTree.SubElement(parent, element)
            ElementTree.SubElement(entry, key_name).text = key
            _render(entry, "Value", each, action)
    elif isinstance(value, dict):
        child = ElementTree.SubElement(parent, name)
        for key, each in value.items():
            _render(child, key, each, action)
    else:
        text = str(value).lower() if isinstance(value, bool) else str(value)
        ElementTree.SubElement(parent, name).text = text


def _request_id(parent: ElementTree.Element, wrapper: str, request_id: str) -> None:
    metadata = ElementTree.SubElement(parent, wrapper)
    ElementTree.SubElement(metadata, "RequestId").text = request_id


def _xml(root: ElementTree.Element) -> bytes:
    # ElementTree writes a carriage return as is, and XML parsers turn it into a
    # line feed; as a character reference it survives (message bodies may hold one).
    document: bytes = ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)
    return document.replace(b"\r", b"&#13;")
