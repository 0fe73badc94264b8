"""Runs a composite action's steps the way the GitHub Actions runner does, on this machine.

What is emulated, following GitHub's documentation of composite actions and workflow commands:

* ``${{ }}`` expressions in ``env:``, ``with:``, ``if:`` and ``outputs:`` — the contexts the action
  uses (``inputs``, ``github``, ``runner``, ``steps``), string literals, ``==``/``!=``, ``!``, ``&&``,
  ``||`` (which return an operand, as GitHub's do) and the status functions. An unknown input or
  context is an error here, so a typo in action.yml fails the test instead of expanding to ''.
* ``run:`` steps: ``bash --noprofile --norc -eo pipefail <script>`` (GitHub's ``shell: bash``), with
  a fresh ``$GITHUB_OUTPUT`` per step, the job's ``$GITHUB_STEP_SUMMARY``, ``$GITHUB_ENV`` and
  ``$GITHUB_PATH`` applied to the following steps, ``$GITHUB_ACTION_PATH`` and ``$RUNNER_TEMP``.
* step status: after a failed step, only steps whose ``if:`` holds without ``success()`` run.
* workflow commands in a step's output (``::error::``, ``::warning::``, …), including
  ``::stop-commands::TOKEN`` … ``::TOKEN::``, so a test can see which lines GitHub would act on.

``uses:`` steps (setup-python, cache, upload-artifact) are not run — they need GitHub's services —
but recorded with their ``with:`` resolved, for the test to check.
"""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

# -- expressions --------------------------------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))|(?P<num>\d+(?:\.\d+)?)"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.-]*))")
_EXPR = re.compile(r"\$\{\{(.*?)\}\}", re.DOTALL)


class ExpressionError(ValueError):
    pass


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ExpressionError(f"cannot parse expression {text!r} at {pos}")
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
        pos = m.end()
    return out


def _truthy(value: Any) -> bool:
    return value not in (None, "", 0, False)


def _as_str(value: Any) -> str:
    if value is None:
        return ""
    if value is True or value is False:
        return "true" if value else "false"
    return str(value)


class _Parser:
    def __init__(self, text: str, lookup, status: dict[str, bool]):
        self.toks = _tokens(text)
        self.i = 0
        self.lookup = lookup
        self.status = status

    def peek(self):
        return self.toks[self.i] if self.i < len(self.toks) else (None, None)

    def take(self):
        tok = self.peek()
        self.i += 1
        return tok

    def parse(self):
        value = self.or_()
        if self.i != len(self.toks):
            raise ExpressionError(f"unexpected {self.peek()[1]!r}")
        return value

    def or_(self):
        value = self.and_()
        while self.peek() == ("op", "||"):
            self.take()
            right = self.and_()
            value = value if _truthy(value) else right
        return value

    def and_(self):
        value = self.cmp()
        while self.peek() == ("op", "&&"):
            self.take()
            right = self.cmp()
            value = right if _truthy(value) else value
        return value

    def cmp(self):
        value = self.unary()
        if self.peek() in (("op", "=="), ("op", "!=")):
            op = self.take()[1]
            right = self.unary()
            same = _as_str(value).lower() == _as_str(right).lower()  # GitHub compares strings case-insensitively
            return same if op == "==" else not same
        return value

    def unary(self):
        if self.peek() == ("op", "!"):
            self.take()
            return not _truthy(self.unary())
        return self.primary()

    def primary(self):
        kind, text = self.take()
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return float(text) if "." in text else int(text)
        if kind == "op" and text == "(":
            value = self.or_()
            if self.take() != ("op", ")"):
                raise ExpressionError("missing )")
            return value
        if kind == "name":
            if self.peek() == ("op", "("):
                self.take()
                if self.take() != ("op", ")"):
                    raise ExpressionError(f"{text}() takes no arguments here")
                if text not in self.status:
                    raise ExpressionError(f"unknown function {text}()")
                return self.status[text]
            if text in ("true", "false"):
                return text == "true"
            if text == "null":
                return None
            return self.lookup(text)
        raise ExpressionError(f"unexpected {text!r}")


# -- the run ------------------------------------------------------------------------------------
@dataclass
class StepResult:
    name: str
    kind: str  # "run" or "uses"
    ran: bool
    rc: int = 0
    outputs: dict[str, str] = field(default_factory=dict)
    log: str = ""
    uses: str = ""
    with_: dict[str, str] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepResult]
    outputs: dict[str, str]
    summary: str
    failed: bool
    commands: list[tuple[str, str]]  # workflow commands GitHub would act on: (command, message)

    @property
    def log(self) -> str:
        return "\n".join(s.log for s in self.steps)

    def step(self, name: str) -> StepResult:
        return next(s for s in self.steps if s.name == name)

    @property
    def exit_code(self) -> int:
        """The job's failing step's exit code, 0 when every step succeeded."""
        return next((s.rc for s in self.steps if s.ran and s.rc != 0), 0)


def _read_outputs(path: Path) -> dict[str, str]:
    """``name=value`` lines and ``name<<DELIMITER`` … ``DELIMITER`` blocks, as GitHub reads them."""
    out: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delim = line.split("<<", 1)
            body = []
            i += 1
            while i < len(lines) and lines[i] != delim:
                body.append(lines[i])
                i += 1
            out[name] = "\n".join(body)
        elif "=" in line:
            name, value = line.split("=", 1)
            out[name] = value
        i += 1
    return out


def _commands(log: str) -> list[tuple[str, str]]:
    """Workflow commands GitHub would act on in this output, honouring ::stop-commands::."""
    found, stopped = [], None
    for line in log.splitlines():
        line = line.strip()  # the runner trims a line before looking for a command
        if stopped is not None:
            if line == f"::{stopped}::":
                stopped = None
            continue
        m = re.match(r"^::([a-zA-Z-]+)(?: [^:]*)?::(.*)$", line)
        if not m:
            continue
        if m.group(1) == "stop-commands":
            stopped = m.group(2)
            continue
        found.append((m.group(1), m.group(2)))
    return found


class ActionRunner:
    """Runs ``action.yml`` from ``action_path`` with the given inputs."""

    def __init__(self, action_path: Path, workdir: Path, base_env: dict[str, str], *, job: str = "health",
                 run_id: str = "4242", run_attempt: str = "1"):
        self.action_path = Path(action_path)
        self.action = yaml.safe_load((self.action_path / "action.yml").read_text(encoding="utf-8"))
        self.workdir = Path(workdir)
        self.base_env = dict(base_env)
        self.github = {"action_path": str(self.action_path), "job": job, "run_id": run_id,
                       "run_attempt": run_attempt, "workspace": str(self.workdir)}

    def _inputs(self, given: dict[str, str]) -> dict[str, str]:
        declared = self.action.get("inputs", {})
        unknown = set(given) - set(declared)
        if unknown:
            raise ExpressionError(f"inputs not declared in action.yml: {sorted(unknown)}")
        values = {}
        for name, spec in declared.items():
            if name in given:
                values[name] = str(given[name])
            elif spec.get("required") and "default" not in spec:
                raise ExpressionError(f"required input {name!r} not given")
            else:
                values[name] = str(spec.get("default", ""))
        return values

    def run(self, inputs: dict[str, str], env: dict[str, str] | None = None, skip: tuple[str, ...] = (),
            only: tuple[str, ...] | None = None) -> ActionRun:
        """Run every step; ``skip`` names run steps not to execute (an install already done), ``only``
        the run steps to execute (the others are treated as skipped)."""
        inputs = self._inputs(inputs)
        temp = self.workdir / f"runner-temp-{uuid.uuid4().hex[:6]}"
        temp.mkdir(parents=True)
        summary = temp / "_step_summary.md"
        github_env = temp / "_github_env"
        github_path = temp / "_github_path"
        for f in (summary, github_env, github_path):
            f.write_text("")
        runner = {"temp": str(temp), "os": "Linux"}
        results: list[StepResult] = []
        step_outputs: dict[str, dict[str, str]] = {}
        failed = False

        def lookup(name: str):
            parts = name.split(".")
            head = parts[0]
            if head == "inputs":
                if parts[1] not in inputs:
                    raise ExpressionError(f"unknown input {parts[1]!r}")
                return inputs[parts[1]]
            if head == "github":
                if parts[1] not in self.github:
                    raise ExpressionError(f"github.{parts[1]} is not emulated")
                return self.github[parts[1]]
            if head == "runner":
                return runner[parts[1]]
            if head == "steps":
                if len(parts) != 4 or parts[2] != "outputs":
                    raise ExpressionError(f"only steps.<id>.outputs.<name> is emulated, not {name}")
                return step_outputs.get(parts[1], {}).get(parts[3], "")
            raise ExpressionError(f"unknown context in {name!r}")

        def evaluate(text: str):
            return _Parser(text, lookup, {"success": not failed, "failure": failed, "always": True,
                                          "cancelled": False}).parse()

        def interpolate(value: Any) -> str:
            return _EXPR.sub(lambda m: _as_str(evaluate(m.group(1))), str(value))

        extra_path: list[str] = []
        job_env: dict[str, str] = {}
        for index, step in enumerate(self.action["runs"]["steps"]):
            name = step.get("name") or step.get("id") or f"step {index}"
            condition = str(step.get("if", "success()"))
            inner = _EXPR.fullmatch(condition.strip())
            condition = inner.group(1) if inner else condition
            has_status = re.search(r"\b(success|failure|always|cancelled)\(\)", condition)
            should = _truthy(evaluate(condition)) and (bool(has_status) or not failed)
            if "uses" in step:
                res = StepResult(name, "uses", should, uses=step["uses"],
                                 with_={k: interpolate(v) for k, v in (step.get("with") or {}).items()})
                results.append(res)
                continue
            res = StepResult(name, "run", should)
            results.append(res)
            excluded = name in skip or (only is not None and name not in only)
            if not should or excluded:
                res.ran = should and not excluded
                continue
            output_file = temp / f"_output_{index}"
            output_file.write_text("")
            res.env = {k: interpolate(v) for k, v in (step.get("env") or {}).items()}
            env_now = {**self.base_env, **(env or {}), **job_env, **res.env,
                       "GITHUB_ACTIONS": "true", "CI": "true", "RUNNER_TEMP": str(temp),
                       "GITHUB_ACTION_PATH": str(self.action_path), "GITHUB_WORKSPACE": str(self.workdir),
                       "GITHUB_OUTPUT": str(output_file), "GITHUB_STEP_SUMMARY": str(summary),
                       "GITHUB_ENV": str(github_env), "GITHUB_PATH": str(github_path)}
            if extra_path:
                env_now["PATH"] = os.pathsep.join([*reversed(extra_path), env_now.get("PATH", "")])
            script = temp / f"_step_{index}.sh"
            script.write_text(step["run"], encoding="utf-8")
            assert step.get("shell") == "bash", f"step {name!r}: composite run steps need shell: bash"
            proc = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
                                  cwd=self.workdir, env=env_now, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, timeout=600, check=False)
            res.rc, res.log = proc.returncode, proc.stdout
            res.outputs = _read_outputs(output_file)
            if step.get("id"):
                step_outputs[step["id"]] = res.outputs
            job_env.update(_read_outputs(github_env))
            extra_path = [p for p in github_path.read_text().splitlines() if p]
            if res.rc != 0:
                failed = True

        outputs = {name: interpolate(spec["value"]) for name, spec in (self.action.get("outputs") or {}).items()}
        log = "\n".join(r.log for r in results)
        return ActionRun(results, outputs, summary.read_text(encoding="utf-8"), failed, _commands(log))
