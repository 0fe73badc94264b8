"""The ``scan`` command's usage errors, help, URI handling, auth, and the tag-size rule."""

from __future__ import annotations

import base64
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from mlflow_support import scan_cli

from trackerhealth.adapters.mlflow import SelectionError, parse_since, parse_uri
from trackerhealth.adapters.mlflow._http import RestClient
from trackerhealth.writers import mlflow_writer as mw


def test_help_has_examples_and_every_option():
    out = scan_cli(["--help"]).output
    assert "Examples:" in out and "trackerhealth scan --mlflow-uri http://mlflow.internal:5000" in out
    for option in ("--mlflow-uri", "--experiment", "--filter", "--run", "--since", "--format", "--fail-on",
                   "--workers", "--config", "--cache-dir", "--no-cache", "--dry-run", "--alert-webhook", "--progress"):
        assert option in out
    assert "tags.trackerhealth.status = 'critical'" in out


def test_usage_errors_exit_2_and_name_the_fix(mlflow_server, experiment, monkeypatch):
    _, exp_name = experiment
    url = mlflow_server.url
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cases = [
        ([], "--mlflow-uri"),
        (["--mlflow-uri", url], "--experiment NAME_OR_ID"),
        (["--mlflow-uri", url, "-e", "no-such-experiment"], f"'{exp_name}'"),  # lists what exists
        (["--mlflow-uri", url, "-e", exp_name, "--since", "yesterday-ish"], "30m, 2h, 7d"),
        (["--mlflow-uri", url, "-e", exp_name, "--filter", "metrics.loss < 1 OR metrics.loss > 2"], "rejects OR"),
        (["--mlflow-uri", url, "--run", "0" * 32], "check --run"),
        (["--mlflow-uri", url, "-e", exp_name, "--alert-webhook", "hooks.slack.com/x"], "--alert-webhook"),
        (["--mlflow-uri", "databricks", "-e", "x"], "not supported yet"),
        (["--mlflow-uri", "ftp://x/y", "-e", "x"], "unsupported tracking URI scheme"),
    ]
    for args, expected in cases:
        result = scan_cli(args)
        assert result.exit_code == 2, (args, result.output)
        assert expected in result.stderr, (args, result.stderr)


def test_bad_config_is_a_usage_error(mlflow_server, experiment, tmp_path):
    bad = tmp_path / "trackerhealth.toml"
    bad.write_text("[thresholds.no-such-diagnosis]\nx = 1\n")
    result = scan_cli(["--mlflow-uri", mlflow_server.url, "-e", experiment[1], "--config", str(bad)])
    assert result.exit_code == 2 and "unknown diagnosis" in result.stderr


def test_missing_mlflow_says_what_to_install(tmp_path, monkeypatch):
    db = tmp_path / "m.db"
    db.write_bytes(b"")
    for name in [m for m in sys.modules if m == "mlflow" or m.startswith("mlflow.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # import mlflow -> ImportError
    result = scan_cli(["--mlflow-uri", f"sqlite:///{db}", "-e", "x"])
    assert result.exit_code == 2
    assert "pip install 'trackerhealth[mlflow]'" in result.stderr


def test_uri_kinds_redaction_and_cache_keys(tmp_path):
    http = parse_uri("https://alice:s3cret@mlflow.internal:5000/")
    assert http.kind == "http" and http.redacted == "https://alice:***@mlflow.internal:5000"
    assert "s3cret" not in http.cache_key() and http.cache_key().startswith("mlflow.internal-")
    assert http.ui_base == "https://mlflow.internal:5000"  # links carry no credentials
    pg = parse_uri("postgresql+psycopg2://u:pw@db:5432/mlflow")
    assert (pg.kind, pg.dialect) == ("database", "postgresql") and "pw" not in pg.redacted
    (tmp_path / "m.db").write_bytes(b"")
    lite = parse_uri(f"sqlite:///{tmp_path}/m.db")
    assert lite.sqlite_path == tmp_path / "m.db"
    (tmp_path / "mlruns").mkdir()
    assert parse_uri(str(tmp_path / "mlruns")).kind == "file"
    assert parse_uri(f"file://{tmp_path}/mlruns").file_path == tmp_path / "mlruns"
    with pytest.raises(SelectionError, match="no MLflow file store"):
        parse_uri(str(tmp_path / "nothing"))


def test_since_parsing():
    now = 1_750_000_000.0
    assert parse_since("2h", now) == int((now - 7200) * 1000)
    assert parse_since("1w", now) == int((now - 604800) * 1000)
    assert parse_since("2025-06-01T00:00:00Z") == 1_748_736_000_000
    assert parse_since("2025-06-01") == 1_748_736_000_000  # UTC unless it says otherwise
    assert parse_since(None) is None


def test_tag_values_never_exceed_mlflow_limit():
    ids = [f"diagnosis-{i}" for i in range(2000)]
    value = mw.fit(",".join(ids))
    assert len(value) <= mw.MAX_TAG
    kept, _, rest = value.rpartition(",…+")
    assert kept.split(",") == ids[: len(kept.split(","))]  # whole ids only
    assert int(rest) == len(ids) - len(kept.split(","))
    assert mw.fit("short") == "short"
    assert len(mw.fit("x" * 9000)) == mw.MAX_TAG


class _Recorder(BaseHTTPRequestHandler):
    seen: ClassVar[list] = []

    def do_GET(self):
        type(self).seen.append(dict(self.headers))
        body = json.dumps({"experiment": {"experiment_id": "1", "name": "x"}}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.mark.parametrize("env, expected", [
    ({"MLFLOW_TRACKING_TOKEN": "tok"}, "Bearer tok"),
    ({"MLFLOW_TRACKING_USERNAME": "u", "MLFLOW_TRACKING_PASSWORD": "p"}, "Basic " + base64.b64encode(b"u:p").decode()),
])
def test_auth_comes_from_mlflow_environment(monkeypatch, env, expected):
    for k in ("MLFLOW_TRACKING_TOKEN", "MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        _Recorder.seen.clear()
        rest = RestClient(f"http://127.0.0.1:{server.server_port}")
        assert rest.get("/api/2.0/mlflow/experiments/get", {"experiment_id": "1"})["experiment"]["name"] == "x"
        assert _Recorder.seen[-1]["Authorization"] == expected
    finally:
        server.shutdown()
        server.server_close()
