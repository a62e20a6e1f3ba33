"""Validate every statemachines/*.asl.json two ways, because neither check covers the other:

* statelint (a Python port of AWS's statelint): graph checks, dangling Next, unreachable states,
  missing fields. ``--ignore=URI`` because ``${...}`` placeholders are not ARNs until deploy.
* cfn-lint rule E3601 (the ASL JSON schema). It only looks inside AWS::StepFunctions::StateMachine
  resources, never at a SAM DefinitionUri file, so each file is wrapped in one with its
  DefinitionSubstitutions filled with well-formed ARNs.

Exit code 0 when every file passes both; 1 otherwise, with the findings printed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from cfnlint.api import ManualArgs, lint

ROOT = Path(__file__).resolve().parent.parent
DUMMY_FUNCTION_ARN = "arn:aws:lambda:us-west-2:123456789012:function:{}"


def statelint(path: Path) -> list[str]:
    result = subprocess.run([sys.executable, "-m", "statelint", "--ignore=URI", str(path)], capture_output=True, text=True, check=False)  # noqa: S603
    findings = [line for line in (result.stdout + result.stderr).splitlines() if line.strip()]
    return findings if result.returncode or findings else []


def cfn_schema(path: Path) -> list[str]:
    text = path.read_text()
    substitutions = {name: DUMMY_FUNCTION_ARN.format(name) for name in set(re.findall(r"\$\{([A-Za-z0-9]+)\}", text))}
    template = {
        "Resources": {
            "StateMachine": {
                "Type": "AWS::StepFunctions::StateMachine",
                "Properties": {
                    "RoleArn": "arn:aws:iam::123456789012:role/r",
                    "Definition": json.loads(text),
                    "DefinitionSubstitutions": substitutions,
                },
            }
        }
    }
    return [f"{m.rule.id} {m.message}" for m in lint(json.dumps(template), config=ManualArgs(regions=["us-west-2"]))]


def main() -> int:
    failed = False
    files = sorted((ROOT / "statemachines").glob("*.asl.json"))
    if not files:
        print("no statemachines/*.asl.json found", file=sys.stderr)
        return 1
    for path in files:
        findings = statelint(path) + cfn_schema(path)
        status = "ok" if not findings else "FAILED"
        print(f"{path.relative_to(ROOT)}: {status}")
        for finding in findings:
            print(f"  {finding}")
        failed = failed or bool(findings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
