"""The project's "Training health" W&B Report, kept up to date in place by each scan.

Built with ``wandb-workspaces`` (W&B's report library): a short guide to the health tags, then a
panel grid over the project's runs — the runs table sorted by ``trackerhealth/score`` (worst
first) — with the four views of the run dashboard as W&B line plots: train vs val loss (log
scale), gradient norms (total and per layer), learning rate and momentum, GPU utilization and
step time. The metric keys are the ones the scanned runs logged for each role (the most common).

The report is found by its internal name (``trackerhealth-training-health``) through the SDK's
``api.reports(…)`` and saved with wandb-workspaces' own ``upsertView`` document, passing the found
id, so each scan updates the same report instead of adding one; when the spec is unchanged nothing
is written. (wandb-workspaces' ``Report.save()`` is not used: it lists every project of the
entity first, to create the project if missing, which a scan never needs.)
"""

from __future__ import annotations

import json
from collections import Counter

from .formats import sweep_lines

REPORT_NAME = "trackerhealth-training-health"
TITLE = "Training health"
DESCRIPTION = "Which runs are unhealthy, why, and what to do (written by trackerhealth)."
PER_LAYER = 8  # per-layer gradient-norm lines in the gradient panel

GUIDE = """Runs are scanned by **trackerhealth**; each run carries health tags and summary keys:

* tag `health:ok`, or `health:<diagnosis>` per finding (filter the runs table by tag);
* `trackerhealth/score` (0–100, higher is healthier; the table below is sorted worst first) and
  `trackerhealth/convergence_speed`, `stability`, `gradient_health`, `resource_efficiency`,
  `overfitting_risk`;
* the run's full health dashboard in its Files tab: `trackerhealth/dashboard.html`.

Diagnoses: loss-oscillation, overfitting, nonfinite, slow-convergence, periodic-spikes,
vanishing-gradients, input-bottleneck, task-imbalance; and, for a run compared with its group (W&B
group or sweep, or `--group-by config.NAME`), baseline-regression."""


def _common(run_roles: list[dict], role: str, limit: int = 1) -> list[str]:
    counts: Counter[str] = Counter()
    for roles in run_roles:
        value = roles.get(role)
        for key in (value if isinstance(value, list) else [value] if value else []):
            counts[key] += 1
    return [k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:limit]]


def _wandb_key(key: str) -> str:
    # System metrics are read as system/<name>; W&B's charts call them system.<name>.
    return "system." + key[len("system/"):] if key.startswith("system/") else key


def panel_keys(run_roles: list[dict]) -> dict[str, list[str]]:
    """Per view, the metric keys to plot."""
    views = {
        "loss": _common(run_roles, "train_loss") + _common(run_roles, "val_loss"),
        "gradients": _common(run_roles, "grad_norm") + _common(run_roles, "layer_grad_norms", PER_LAYER),
        "schedule": _common(run_roles, "lr") + _common(run_roles, "momentum"),
        "system": _common(run_roles, "gpu_util") + _common(run_roles, "step_time") + _common(run_roles, "data_time"),
    }
    return {view: [_wandb_key(k) for k in keys] for view, keys in views.items()}


def sweeps_markdown(sweeps) -> str:
    """The sweeps' patterns as the report's second block (empty without a sweep)."""
    if not sweeps:
        return ""
    head = "**Sweeps** (groups of ten or more runs): which configuration values go with which findings."
    return "\n".join([head, "", *sweep_lines(sweeps, markdown=True)])


def build_spec(entity: str, project: str, run_roles: list[dict], sweeps=()) -> str:
    import wandb_workspaces.reports.v2 as wr

    keys = panel_keys(run_roles)
    titles = {"loss": "Train vs val loss (log scale)", "gradients": "Gradient norms",
              "schedule": "Learning rate and momentum", "system": "GPU utilization and step time"}
    panels = [wr.LinePlot(title=titles[view], y=ys, log_y=True if view == "loss" else None,
                          layout=wr.Layout(x=(i % 2) * 12, y=(i // 2) * 8, w=12, h=8))
              for i, (view, ys) in enumerate(keys.items()) if ys]
    runset = wr.Runset(entity=entity, project=project, name="Runs by health score",
                       order=[wr.OrderBy(wr.SummaryMetric("trackerhealth/score"), ascending=True)])
    blocks = [wr.MarkdownBlock(GUIDE)]
    if sweeps:
        blocks.append(wr.MarkdownBlock(sweeps_markdown(sweeps)))
    report = wr.Report(entity=entity, project=project, title=TITLE, description=DESCRIPTION,
                       blocks=[*blocks, wr.PanelGrid(runsets=[runset], panels=panels)])
    return report._to_model().spec.model_dump_json(by_alias=True, exclude_none=True)


def _comparable(spec: str | None) -> object:
    """A spec without the ids wandb-workspaces generates afresh on each build."""
    if not spec:
        return None
    try:
        doc = json.loads(spec)
    except ValueError:
        return spec

    def strip(node):
        if isinstance(node, dict):
            return {k: strip(v) for k, v in node.items() if k not in ("id", "__id__", "ref", "panelRefs")}
        if isinstance(node, list):
            return [strip(v) for v in node]
        return node

    return strip(doc)


def upsert_report(target, run_roles: list[dict], dry_run: bool = False, *, retrying, sweeps=()) -> list[str]:
    """Create or update the report in ``target`` (a :class:`~.wandb_writer.WandbTarget`), through
    ``retrying(call, what)`` (the writer's retry policy); returns one note saying what happened."""
    try:
        from wandb_workspaces.reports.v2 import gql as report_gql
    except ImportError:
        return ["no W&B report: install wandb-workspaces (pip install 'trackerhealth[wandb]')"]
    from ..adapters.wandb import graphql

    api = target.api
    spec = build_spec(target.entity, target.project, run_roles, sweeps)
    existing = retrying(lambda: list(api.reports(target.path, name=REPORT_NAME)), "finding the report")
    found = existing[0] if existing else None
    old_spec = None
    if found is not None:
        old_spec = found.spec if isinstance(found.spec, str) else json.dumps(found.spec)
    if found is not None and _comparable(old_spec) == _comparable(spec):
        return [f"W&B report {TITLE!r} is up to date"]
    if dry_run:
        return [f"dry run: W&B report {TITLE!r} would be {'updated' if found else 'created'}"]
    answer = retrying(lambda: graphql(api, report_gql.upsert_view, {
        "id": found.id if found is not None else None,
        "name": REPORT_NAME, "entityName": target.entity, "projectName": target.project,
        "description": DESCRIPTION, "displayName": TITLE, "type": "runs", "spec": spec}), "saving the report")
    view = (answer.get("upsertView") or {}).get("view") or {}
    url = f"{target.app_url}/{target.entity}/{target.project}/reports/{view.get('id', '')}"
    return [f"W&B report {TITLE!r} {'updated' if found else 'created'}: {url}"]


__all__ = ["REPORT_NAME", "TITLE", "build_spec", "panel_keys", "upsert_report"]
