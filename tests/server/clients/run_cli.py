"""The real-client scenario with the AWS CLI: python run_cli.py AWS ENDPOINT SCENARIO.json

AWS is the ``aws`` executable to drive; each step is one ``aws sqs ... --cli-input-json``
command.  Prints one JSON line per step: {"result": ...} or {"error": {...}}; checking is
the test's job.  Only the standard library and botocore (which every AWS CLI v1 brings) are used.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from typing import Any

import botocore.session
from botocore import xform_name

_ERROR = re.compile(
    r"An error occurred \((?P<code>[^)]*)\) when calling the \w+ operation: (?P<message>.*)", re.S
)


def main(aws: str, endpoint: str, scenario_path: str) -> None:
    with open(scenario_path, encoding="utf-8") as file:
        scenario = json.load(file)
    env = {
        **os.environ,
        "AWS_ACCESS_KEY_ID": "test",
        "AWS_SECRET_ACCESS_KEY": "test",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_MAX_ATTEMPTS": "1",
        "AWS_CONFIG_FILE": os.devnull,
        "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    }
    saved = {"endpoint": endpoint}
    # The CLI runs on the botocore beside this script's python: the protocol of its SQS model.
    print(
        json.dumps({"protocol": botocore.session.get_session().get_service_model("sqs").protocol}), flush=True
    )

    def substitute(value: Any) -> Any:
        if isinstance(value, str):
            return re.sub(r"\$\{(\w+)\}", lambda m: saved[m.group(1)], value)
        if isinstance(value, list):
            return [substitute(v) for v in value]
        if isinstance(value, dict):
            if "$base64" in value:  # AWS CLI v1 takes a blob in JSON input as text and encodes it itself
                return base64.b64decode(value["$base64"]).decode("utf-8")
            return {k: substitute(v) for k, v in value.items()}
        return value

    for step in scenario["steps"]:
        command = [aws, "sqs", xform_name(step["call"], "-"), "--endpoint-url", endpoint, "--output", "json"]
        command += ["--cli-input-json", json.dumps(substitute(step.get("params", {})))]
        done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
        if done.returncode == 0:
            result = json.loads(done.stdout) if done.stdout.strip() else {}
            for name, path in step.get("save", {}).items():
                saved[name] = pick(result, path)
            outcome: dict[str, Any] = {"result": result}
        else:
            found = _ERROR.search(done.stderr)
            if found is None:
                outcome = {"error": {"code": None, "message": done.stderr.strip(), "status": None}}
            else:
                message = found.group("message").strip()
                outcome = {"error": {"code": found.group("code"), "message": message, "status": None}}
        print(json.dumps(outcome), flush=True)


def pick(value: Any, path: str) -> Any:
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value.get(part)
    return value


if __name__ == "__main__":
    main(*sys.argv[1:])
