"""Fixtures for the dashboard tests: real training runs, and one real headless Chromium per session.

Chromium is Debian's ``chromium`` package (``apt-get install -y chromium``; CI's .ci/run installs
it the same way), driven by Playwright with ``executable_path`` — never a browser downloaded by
``playwright install``. Each page records console errors, page errors, dialogs and every request,
so a test can assert that nothing was fetched and nothing was executed that should not be.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from dashboard_helpers import train

from trackerhealth import analyze

pytest.importorskip("plotly", reason="pip install 'trackerhealth[dashboard]'")

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
    "--disable-component-update", "--disable-sync",
]
REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "test-artifacts"


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """``test-artifacts/`` at the repo root (git-ignored): screenshots for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS


@pytest.fixture(scope="session")
def browser_context():
    """A real headless Chromium with a fresh profile (``--user-data-dir``) for the whole session."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright (the test extra)")
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} not found: apt-get update && apt-get install -y chromium")
    profile = tempfile.mkdtemp(prefix="th-chromium-")
    with sync_api.sync_playwright() as p:
        # launch_persistent_context is how Playwright takes --user-data-dir: a fresh, empty one.
        context = p.chromium.launch_persistent_context(
            profile, executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS,
            viewport={"width": 1366, "height": 900}, service_workers="block")
        try:
            yield context
        finally:
            context.close()
            shutil.rmtree(profile, ignore_errors=True)


@dataclass
class Watched:
    """A page and everything it did: console errors, uncaught errors, dialogs, requests."""

    page: object
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)

    def external_requests(self, own: Path | None = None) -> list[str]:
        """Requests other than loading the page itself (``own``)."""
        allowed = {own.resolve().as_uri()} if own is not None else set()
        return [u for u in self.requests if u not in allowed]


@pytest.fixture
def watched(browser_context):
    page = browser_context.new_page()
    w = Watched(page)
    page.on("console", lambda m: w.console_errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: w.page_errors.append(str(e)))

    def on_dialog(d):
        w.dialogs.append(d.message)
        d.dismiss()

    page.on("dialog", on_dialog)
    page.on("request", lambda r: w.requests.append(r.url))
    try:
        yield w
    finally:
        page.close()


@pytest.fixture(scope="session")
def healthy_run():
    """A real, healthy training run that logs all four panels' metrics."""
    history = train("healthy-spirals-mlp", url="https://wandb.ai/acme/dashboard-tests/runs/healthy-spirals-mlp-0",
                    tags=("baseline", "mlp"), config={"lr": 0.1, "momentum": 0.9, "batch_size": 64})
    return history, analyze(history)


@pytest.fixture(scope="session")
def unhealthy_run():
    """The same training with an LR-schedule typo at step 500: gradients explode, the loss goes NaN."""
    history = train("lr-typo-spirals-mlp", lr_spike_at=500, tracker="mlflow", project="0",
                    url="http://127.0.0.1:5000/#/experiments/0/runs/lr-typo-spirals-mlp-0")
    return history, analyze(history)


@pytest.fixture(scope="session")
def vanishing_run():
    """The demo's real 14-layer sigmoid MLP (Xavier init), trained here: its first layers' gradients
    vanish, so vanishing-gradients is critical with evidence naming the early layers."""
    from trackerhealth.demo._trainings import vanishing
    from trackerhealth.schema import RunHistory, RunRef

    training = vanishing(quick=True)
    steps, keys, values, ms = zip(*training.rows)
    ref = RunRef("file", "dashboard-tests", training.name, name=training.name)
    history = RunHistory.from_long(ref, steps, keys, values, [t / 1000 for t in ms])
    return history, analyze(history)
