"""Record what the pinned SDK sends: ``python -m tests.wandb.contract.record`` rewrites
``recorded_operations.json`` from a real scan through the real ``wandb`` client.

:func:`exercise` drives everything trackerhealth does through the SDK — list, read histories
(parquet export + live tail) and system metrics, read runs fresh, write tags and summary, upload
the dashboard, alert, find and save the project report, a second (incremental) scan, a run
deleted mid-scan, list the entity's projects (``scan --entity``: ``wandb.Api().projects``) — plus
the SDK's sampled history read. The server runs with ``strict_operations=False`` for it, so only
the schema is enforced; ``tests/wandb/test_api_cli.py`` runs the same exercise and compares what
was sent with the file, so an SDK upgrade that changes a request fails there with the difference.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from .corpus import CORPUS, load_into
from .server import RECORDED, ContractServer

ENTITY, PROJECT = "record-team", "record-project"
RUNS = ("nan_corrupted_batch_hf", "healthy_autoencoder_adam", "bottleneck_wandb_decode_ms")


@contextmanager
def environment(values: dict[str, str]):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def exercise(server: ContractServer, workdir: Path) -> None:
    from trackerhealth.adapters.wandb import WandbApiAdapter
    from trackerhealth.scan import scan
    from trackerhealth.trackers import writer_for

    entries = [e for e in json.loads((CORPUS / "manifest.json").read_text()) if e["name"] in RUNS]
    runs = load_into(server.store, ENTITY, PROJECT, entries)
    doomed = server.store.add_run(ENTITY, PROJECT, "doomed01", history=[{"_step": 0, "loss": 1.0}])
    # Deleted after the listing, before its history is read.
    server.hooks["RunHistoryKeys"] = lambda v: server.store.delete_run(ENTITY, PROJECT, "doomed01") \
        if v.get("name") == doomed.name else None
    with environment({**server.env(), "WANDB_SILENT": "true"}):
        for _ in range(2):  # the second scan is incremental: runs come from the cache
            adapter = WandbApiAdapter(f"{ENTITY}/{PROJECT}", cache_dir=workdir / "cache", workers=2)
            scan(adapter, writer_for(adapter), workers=2)  # ends with the report and scan_complete()
            adapter.close()
        # ``scan --entity``: the entity's projects, through the SDK's Api().projects (GetProjects).
        from trackerhealth.adapters.wandb._projects import list_projects

        listed = list_projects(ENTITY, timeout=30)
        assert listed == [PROJECT], listed
        # The SDK's sampled history read (RunSampledHistory), which trackerhealth does not use.
        import wandb

        run = wandb.Api(timeout=30).run(f"{ENTITY}/{PROJECT}/{next(iter(runs.values())).name}")
        run.history(keys=["train/loss"], pandas=False)
    server.hooks.clear()


def signatures(server: ContractServer) -> dict[str, list[list[str]]]:
    return {name: sorted(list(sig) for sig in sigs) for name, sigs in sorted(server.signatures.items())}


def main() -> None:
    with ContractServer(strict_operations=False) as server, tempfile.TemporaryDirectory() as tmp:
        exercise(server, Path(tmp))
        if server.violations:
            sys.exit("the SDK sent requests outside the schema:\n" + "\n".join(server.violations))
        recorded = signatures(server)
    RECORDED.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")
    print(f"recorded {len(recorded)} operations: {', '.join(recorded)}")


if __name__ == "__main__":
    main()
