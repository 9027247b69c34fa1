"""The real-client scenario with boto3, whichever version runs it: python run_python.py ENDPOINT SCENARIO.json

Prints one JSON line per step: {"result": ...} or {"error": {...}}; checking is the test's job.
Only boto3 and the standard library are imported: an older boto3 runs it in its own environment.
"""

from __future__ import annotations

import base64
import json
import re
import sys
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError


def main(endpoint: str, scenario_path: str) -> None:
    with open(scenario_path, encoding="utf-8") as file:
        scenario = json.load(file)
    client = boto3.client(
        "sqs",
        endpoint_url=endpoint,
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
        config=Config(retries={"max_attempts": 1}),
    )
    print(json.dumps({"protocol": client.meta.service_model.protocol}), flush=True)
    methods = {api: method for method, api in client.meta.method_to_api_mapping.items()}
    saved = {"endpoint": endpoint}

    def substitute(value: Any) -> Any:
        if isinstance(value, str):
            return re.sub(r"\$\{(\w+)\}", lambda m: saved[m.group(1)], value)
        if isinstance(value, list):
            return [substitute(v) for v in value]
        if isinstance(value, dict):
            if "$base64" in value:
                return base64.b64decode(value["$base64"])
            return {k: substitute(v) for k, v in value.items()}
        return value

    for step in scenario["steps"]:
        try:
            result = normalize(getattr(client, methods[step["call"]])(**substitute(step.get("params", {}))))
            for name, path in step.get("save", {}).items():
                saved[name] = pick(result, path)
            outcome: dict[str, Any] = {"result": result}
        except ClientError as error:
            response = error.response
            outcome = {
                "error": {
                    "code": response["Error"]["Code"],
                    "message": response["Error"]["Message"],
                    "status": response["ResponseMetadata"]["HTTPStatusCode"],
                }
            }
        print(json.dumps(outcome), flush=True)


def normalize(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, list):
        return [normalize(v) for v in value]
    if isinstance(value, dict):
        return {k: normalize(v) for k, v in value.items() if k != "ResponseMetadata"}
    return value


def pick(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value.get(part)
    return value


if __name__ == "__main__":
    main(*sys.argv[1:])
