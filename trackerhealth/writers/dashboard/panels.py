"""The four panels of a run dashboard, as Plotly figure specs (plain dicts; no plotly import).

1. training vs validation loss (log-scale toggle);
2. gradient norms: the total norm above a per-layer heatmap (layers in model order, log colour);
3. learning rate and momentum (two axes);
4. GPU utilization and step time, with data vs compute time where logged.

Series are shrunk by :mod:`.downsample` (spikes, NaN/Inf and finding ranges stay visible). Each
finding's evidence range is drawn on the panel that shows its metric (the loss panel otherwise) as
a shaded band labelled with the finding's id, whose hover label is the finding's title and message.
On the per-layer heatmap the band outlines exactly the rows of the layers its evidence names. A
panel whose data the run did not log carries a ``missing`` text saying what to log instead of a
figure.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...roles import RoleView
from ...schema import CRITICAL, HealthReport
from . import downsample as ds
from ._encode import plot_text, step_array, typed_array, value_array

# Okabe–Ito: distinguishable with every common colour-vision deficiency.
BLACK, ORANGE, SKY, GREEN, YELLOW, BLUE, VERMILLION, PURPLE = (
    "#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")
FILL_RGB = {CRITICAL: "213,94,0", "warning": "230,159,0"}  # vermillion, orange
EDGE = {CRITICAL: "rgba(213,94,0,0.75)", "warning": "rgba(230,159,0,0.85)"}
WIDE_RANGE_SHARE = 0.25  # a band this wide is drawn fainter, so the data under it stays readable
MARKER = {"NaN": "x-thin-open", "+Inf": "triangle-up", "-Inf": "triangle-down"}
MIN_RANGE_SHARE = 0.004  # a one-step finding is drawn at least this share of the run wide
LABEL_CLEARANCE = 0.15  # share of the run: closer band labels are stacked, not drawn over each other
LABEL_STEP = 0.13  # how far down (share of the panel height) a stacked label moves

PANEL_ROLES = {
    "loss": ("train_loss", "val_loss", "task_losses"),
    "grad": ("grad_norm", "layer_grad_norms"),
    "optim": ("lr", "momentum"),
    "system": ("gpu_util", "step_time", "data_time", "compute_time"),
}
TITLES = {
    "loss": "Training vs validation loss",
    "grad": "Gradient norms by layer",
    "optim": "Learning rate and momentum",
    "system": "GPU utilization and step time",
}
WHAT_TO_LOG = {
    "loss": "No training or validation loss was logged. Log the training loss every step "
            "(e.g. wandb.log({'train/loss': loss}) or mlflow.log_metric('train_loss', loss, step=step)) "
            "and the validation loss at every evaluation ('val/loss').",
    "grad": "No gradient norm was logged. Log the total norm every step (the value returned by "
            "torch.nn.utils.clip_grad_norm_, as 'grad_norm') and per-layer norms as "
            "'grad_norm/<layer name>' (in model order) to see this heatmap.",
    "optim": "No learning rate or momentum was logged. Log 'lr' (scheduler.get_last_lr()[0]) every step, "
             "and 'momentum' (SGD momentum or Adam beta1).",
    "system": "No GPU utilization or step timing was logged. Turn on the tracker's system metrics "
              "(W&B does by default; mlflow.enable_system_metrics_logging()) and log 'step_time', "
              "'data_time' and 'compute_time' in seconds per step.",
}
PARTIAL = {
    "val_loss": "Validation loss not logged: log 'val/loss' at each evaluation to see overfitting.",
    "grad_norm": "Total gradient norm not logged: log 'grad_norm' (the return value of clip_grad_norm_).",
    "layer_grad_norms": "Per-layer gradient norms not logged: log 'grad_norm/<layer name>' for each layer "
                        "to see the heatmap (vanishing or exploding layers).",
    "lr": "Learning rate not logged: log 'lr' every step.",
    "momentum": "Momentum not logged: log 'momentum' (SGD momentum or Adam beta1).",
    "gpu_util": "GPU utilization not logged: turn on the tracker's system metrics.",
    "step_time": "Step time not logged: log 'step_time' in seconds.",
    "data_time": "Data vs compute time not logged: log 'data_time' and 'compute_time' per step to see "
                 "whether the GPU waits for input.",
}


@dataclass(frozen=True)
class Range:
    """One evidence step range of one finding, as drawn."""

    finding: str
    level: str
    title: str
    message: str
    metric: str
    start: float
    end: float
    detail: str = ""


@dataclass
class Panel:
    id: str
    title: str
    figure: dict[str, Any] | None = None
    missing: str = ""
    notes: list[str] = field(default_factory=list)
    log_axis: str | None = None  # layout key of the y axis the log toggle switches
    points_logged: int = 0
    points_shown: int = 0
    ranges: list[Range] = field(default_factory=list)


def finding_ranges(report: HealthReport) -> list[Range]:
    """Every evidence step range of every warning/critical finding (duplicates removed)."""
    seen, out = set(), []
    for f in report.problems:
        for e in f.evidence:
            if e.step_start is None or not math.isfinite(e.step_start):
                continue
            end = e.step_end if e.step_end is not None and math.isfinite(e.step_end) else e.step_start
            start, end = min(e.step_start, end), max(e.step_start, end)
            key = (f.id, e.metric, start, end)
            if key in seen:
                continue
            seen.add(key)
            out.append(Range(f.id, f.level, f.title, f.message, e.metric or "", float(start), float(end), e.detail))
    return out


def _panel_of_keys(view: RoleView) -> dict[str, str]:
    owner: dict[str, str] = {}
    for panel, roles in PANEL_ROLES.items():
        for role in roles:
            k = view.key(role)
            if k:
                owner.setdefault(k, panel)
            for _, key in view.roles.group(role):
                owner.setdefault(key, panel)
    return owner


def _run_span(view: RoleView) -> tuple[float, float]:
    logged = [view.history[k] for k in view.history.keys()]  # noqa: SIM118 - RunHistory is not iterable
    steps = [(float(s.steps[0]), float(s.steps[-1])) for s in logged if len(s)]
    return (min(a for a, _ in steps), max(b for _, b in steps)) if steps else (0.0, 1.0)


# -- traces -------------------------------------------------------------------------------------
def _hover_steps() -> str:
    return "step %{x:,}"


def line_traces(key: str, reduced: ds.Reduced, color: str, *, dash: str = "solid", yaxis: str = "y",
                width: float = 1.6, markers: bool = False, visible: Any = True) -> list[dict[str, Any]]:
    """The line for one metric plus one marker trace per non-finite kind it contains."""
    name = plot_text(key)
    # A handful of points (an epoch-level metric, a single summary value) is invisible as a bare line.
    mode = "lines+markers" if markers or len(reduced.steps) <= 60 else "lines"
    traces = [{
        "type": "scatter", "mode": mode, "name": name, "x": step_array(reduced.steps),
        "y": value_array(reduced.values), "yaxis": yaxis, "visible": visible,
        "line": {"color": color, "width": width, "dash": dash},
        "marker": {"size": 5, "color": color},
        "hovertemplate": f"{_hover_steps()}<br>%{{y:.4g}}<extra>%{{fullData.name}}</extra>",
        "meta": {"metric": name, "original": reduced.original, "kept": len(reduced.steps)},
    }]
    for m in reduced.markers:
        traces.append({
            "type": "scatter", "mode": "markers", "name": plot_text(f"{key}: {m.kind}"),
            "x": step_array(m.steps), "y": value_array(m.y), "yaxis": yaxis, "visible": visible,
            "marker": {"symbol": MARKER[m.kind], "size": 11, "color": VERMILLION, "line": {"width": 2, "color": VERMILLION}},
            "customdata": np.column_stack([m.counts, m.last_steps]),
            "hovertemplate": f"{m.kind} from step %{{x:,}}<br>%{{customdata[0]:,}} non-finite point(s) through "
                             f"step %{{customdata[1]:,}}<extra>%{{fullData.name}}</extra>",
            "meta": {"nonfinite": m.kind, "metric": name, "count": int(m.counts.sum())},
        })
    return traces


def _wrap(text: str, width: int = 80) -> str:
    return "<br>".join(plot_text(line) for line in textwrap.wrap(text, width) or [""])


def _merge(ranges: Sequence[Range]) -> list[tuple[Range, list[str]]]:
    """One band per (finding, start, end): several evidence metrics over the same steps would
    otherwise stack their shading until the data underneath disappears."""
    merged: dict[tuple[str, float, float], tuple[Range, list[str]]] = {}
    for r in ranges:
        key = (r.finding, r.start, r.end)
        if key in merged:
            if r.metric not in merged[key][1]:
                merged[key][1].append(r.metric)
        else:
            merged[key] = (r, [r.metric])
    return list(merged.values())


def _row_blocks(rows: Sequence[int]) -> list[tuple[int, int]]:
    """Consecutive row indices as ``(first, last)`` blocks: layers 0-3 are one outline, not four."""
    blocks: list[tuple[int, int]] = []
    for i in sorted(set(rows)):
        if blocks and i == blocks[-1][1] + 1:
            blocks[-1] = (blocks[-1][0], i)
        else:
            blocks.append((i, i))
    return blocks


def range_traces(ranges: Sequence[Range], overlay: str, xaxis: str, span: tuple[float, float],
                 strip: bool = False, rows: Sequence[str] = ()) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Shaded bands on an invisible 0–1 overlay axis, so they span the panel whatever its scale
    (log or linear), each with a label (an annotation naming the finding, whose hover is the
    finding's title, message and steps) and the same text as the hover label of the whole band.

    With ``strip`` (over a heatmap, whose cells must keep their own hover) the band is an outline
    without fill; ``rows`` are the heatmap's metric keys top to bottom, and a band whose evidence
    names some of them outlines exactly those rows. Returns ``(traces, annotations)``."""
    traces, labels = [], []
    run = max(span[1] - span[0], 1.0)
    min_width = max(1.0, MIN_RANGE_SHARE * run)
    row_of = {key: i for i, key in enumerate(rows)}
    placed: list[float] = []
    for r, metrics in sorted(_merge(ranges), key=lambda item: (item[0].start, item[0].end)):
        x0, x1 = r.start, r.end
        if x1 - x0 < min_width:
            mid = (x0 + x1) / 2
            x0, x1 = mid - min_width / 2, mid + min_width / 2
        alpha = 0.07 if (r.end - r.start) >= WIDE_RANGE_SHARE * run else 0.18
        steps = f"step {r.start:,.0f}" if r.start == r.end else f"steps {r.start:,.0f}–{r.end:,.0f}"
        detail = f"<br>{_wrap(r.detail)}" if r.detail else ""
        label = (f"<b>{plot_text(r.level.upper())} · {plot_text(r.finding)}</b> {plot_text(r.title)}<br>{_wrap(r.message)}"
                 f"<br><i>{plot_text(', '.join(metrics))}: {plot_text(steps)}</i>{detail}")
        colour = EDGE.get(r.level, EDGE["warning"])
        edge = {"width": 1, "color": colour, "dash": "solid" if r.level == CRITICAL else "dash"}
        meta = {"finding": r.finding, "level": r.level, "start": r.start, "end": r.end}
        # Rows top to bottom on a reversed category axis: row i spans [1-(i+1)/n, 1-i/n] of the overlay.
        named = [row_of[m] for m in metrics if m in row_of] if strip else []
        blocks = [(1 - (b + 1) / len(rows), 1 - a / len(rows), a, b) for a, b in _row_blocks(named)] or [(0.0, 1.0, None, None)]
        for low, high, first, last in blocks:
            xs, ys = [x0, x0, x1, x1, x0], [low, high, high, low, low]
            block_meta = {**meta, "rows": [rows[i] for i in range(first, last + 1)] if first is not None else None}
            if strip:
                # A white halo under the coloured outline keeps it visible on every Viridis colour.
                for line in ({"width": 4, "color": "rgba(255,255,255,0.9)"}, {**edge, "width": 2.2, "dash": "solid"}):
                    traces.append({"type": "scatter", "mode": "lines", "x": xs, "y": ys, "xaxis": xaxis, "yaxis": overlay,
                                   "line": line, "hoverinfo": "skip", "showlegend": False,
                                   "meta": {**block_meta, "outline": True}})
            else:
                traces.append({
                    "type": "scatter", "mode": "lines", "x": xs, "y": ys, "xaxis": xaxis, "yaxis": overlay,
                    "fill": "toself", "fillcolor": f"rgba({FILL_RGB.get(r.level, FILL_RGB['warning'])},{alpha})",
                    "line": edge, "hoveron": "fills", "hoverinfo": "text", "text": label, "name": plot_text(r.finding),
                    "showlegend": False, "meta": block_meta,
                })
        # One label per band, at the top of its first block; labels closer than LABEL_CLEARANCE of
        # the run are stacked downwards so two findings at the same steps stay readable.
        top = blocks[0][1]
        stacked = sum(1 for x in placed if abs(x - x0) < LABEL_CLEARANCE * run)
        placed.append(x0)
        right_side = x0 > span[0] + 0.7 * run
        labels.append({
            "x": x1 if right_side else x0, "xref": xaxis, "y": max(top - stacked * LABEL_STEP, 0.05), "yref": overlay,
            "xanchor": "right" if right_side else "left", "yanchor": "top", "showarrow": False,
            "text": f"<b>{plot_text(r.finding)}</b>", "hovertext": label, "name": plot_text(r.finding),
            "font": {"size": 11, "color": "#1f2328"}, "bgcolor": "rgba(255,255,255,0.88)",
            "bordercolor": colour, "borderwidth": 1.5, "borderpad": 2,
            "hoverlabel": {"align": "left", "bgcolor": "#ffffff", "bordercolor": colour},
        })
    return traces, labels


def _overlay_axis(over: str) -> dict[str, Any]:
    return {"overlaying": over, "range": [0, 1], "visible": False, "fixedrange": True, "showgrid": False}


def _axis(title: str, **kw) -> dict[str, Any]:
    return {"title": {"text": plot_text(title)}, "gridcolor": "#e6e6e6", "zeroline": False,
            "automargin": True, "exponentformat": "e", **kw}


def base_layout(height: int = 340) -> dict[str, Any]:
    return {
        "height": height, "margin": {"l": 70, "r": 70, "t": 36, "b": 48}, "hovermode": "closest",
        "paper_bgcolor": "#ffffff", "plot_bgcolor": "#ffffff", "uirevision": "keep", "showlegend": True,
        "font": {"family": "system-ui, -apple-system, 'Segoe UI', Roboto, sans-serif", "size": 12, "color": "#1f2328"},
        "legend": {"orientation": "h", "x": 0, "y": 1.01, "yanchor": "bottom", "bgcolor": "rgba(255,255,255,0)"},
        "xaxis": _axis("step", tickformat="~s", hoverformat=",.0f"),
        "hoverlabel": {"align": "left", "namelength": -1},
    }


def flat_range(*values: np.ndarray) -> list[float] | None:
    """An explicit y range for a constant series (Plotly would centre it in an arbitrary ±1 range,
    so a constant lr of 1e-3 looks like 0); None when the values vary."""
    v = np.concatenate([x[np.isfinite(x)] for x in values]) if values else np.zeros(0)
    if len(v) == 0:
        return None
    lo, hi = float(v.min()), float(v.max())
    if hi - lo > 1e-9 * max(abs(lo), abs(hi)):
        return None
    pad = abs(hi) * 0.5 if hi != 0 else 1.0
    return [lo - pad, hi + pad]


def _positive_spread(values: np.ndarray) -> float:
    v = values[np.isfinite(values)]
    if len(v) == 0 or (v <= 0).any():
        return 0.0
    return float(v.max() / v.min())


# -- panels -------------------------------------------------------------------------------------
BASELINE_LINE = "rgba(0,0,0,0.25)"  # the group's baseline: faint, behind the run's own colours


def baseline_trace(role: str, curve: dict[str, list], name: str, *, yaxis: str = "y", factor: float = 1.0) -> dict[str, Any]:
    """One of the group baseline's curves (its profile's bin medians), drawn faintly."""
    return {
        "type": "scatter", "mode": "lines", "name": plot_text(f"baseline {name}: {role}"), "legendgroup": "baseline",
        "x": step_array(np.asarray(curve["steps"], dtype=float)),
        "y": value_array(np.asarray(curve["values"], dtype=float) * factor), "yaxis": yaxis,
        "line": {"color": BASELINE_LINE, "width": 3}, "hoverinfo": "skip",
        "meta": {"baseline": name, "role": role},
    }


class _Builder:
    def __init__(self, view: RoleView, ranges: Sequence[Range], group: dict[str, Any] | None = None):
        self.view = view
        # The group's baseline, drawn behind this run's curves (none for the baseline itself).
        group = group or {}
        own = group.get("baseline") == view.ref.id
        self.baseline_name = str(group.get("baseline_name") or "")
        self.baseline = {} if own else dict(group.get("baseline_curves") or {})
        self.span = _run_span(view)
        self.all_ranges = list(ranges)
        owner = _panel_of_keys(view)
        self.ranges_by_panel: dict[str, list[Range]] = {p: [] for p in PANEL_ROLES}
        for r in ranges:
            self.ranges_by_panel[owner.get(r.metric, "loss")].append(r)
        pad = max(0.01 * (self.span[1] - self.span[0]), 0.5)
        self.xrange = (self.span[0] - pad, self.span[1] + pad)
        narrow = sorted(ranges, key=lambda r: r.end - r.start)
        self.keep = [(r.start, r.end) for r in narrow]

    def reduce(self, role: str) -> tuple[str, ds.Reduced] | None:
        s = self.view.series(role)
        if s is None:
            return None
        return self.view.key(role) or role, ds.reduce_series(s, keep_ranges=self.keep)

    def behind(self, role: str, *, yaxis: str = "y", factor: float = 1.0) -> list[dict[str, Any]]:
        """The baseline's curve for ``role``, when the run has a baseline that logged it."""
        curve = self.baseline.get(role)
        return [baseline_trace(role, curve, self.baseline_name, yaxis=yaxis, factor=factor)] if curve else []

    def count(self, panel: Panel, reduced: ds.Reduced) -> None:
        panel.points_logged += reduced.original
        panel.points_shown += reduced.kept

    def finish(self, panel: Panel, traces: list, layout: dict, overlay_for: str = "y", xaxis: str = "x",
               extra: Sequence[tuple[str, str, Sequence[Range], bool]] = (), rows: Sequence[str] = ()) -> Panel:
        """Add the finding bands (on an overlay of ``overlay_for``) and store the figure; ``rows``
        are the heatmap's metric keys, top to bottom, for the bands drawn over it (``strip``)."""
        bands = [("y9", overlay_for, self.ranges_by_panel[panel.id], False)] + list(extra)
        for axis, over, rs, strip in bands:
            if not rs:
                continue
            layout["yaxis" + axis[1:]] = _overlay_axis(over)
            shapes, labels = range_traces(rs, axis, xaxis, self.span, strip=strip, rows=rows if strip else ())
            traces.extend(shapes)
            layout.setdefault("annotations", []).extend(labels)
            panel.ranges.extend(rs)
        # Every panel starts on the same steps (the whole run), so a step lines up across panels.
        layout["xaxis"]["range"] = list(self.xrange)
        panel.figure = {"data": traces, "layout": layout}
        return panel

    # 1. loss
    def loss(self) -> Panel:
        p = Panel("loss", TITLES["loss"])
        train, val = self.reduce("train_loss"), self.reduce("val_loss")
        if train is None and val is None:
            p.missing = WHAT_TO_LOG["loss"]
            return p
        traces: list[dict] = self.behind("train_loss") + self.behind("val_loss")
        spread_src = []
        if train is not None:
            traces += line_traces(train[0], train[1], BLUE)
            self.count(p, train[1])
            spread_src.append(train[1].values)
        else:
            p.notes.append("Training loss not logged: log 'train/loss' every step.")
        if val is not None:
            traces += line_traces(val[0], val[1], ORANGE, dash="dash", width=2, markers=len(val[1].steps) <= 300)
            self.count(p, val[1])
            spread_src.append(val[1].values)
        else:
            p.notes.append(PARTIAL["val_loss"])
        colours = [SKY, GREEN, PURPLE, BLACK]
        # Per-task losses stay one click away, unless the imbalance between them is the finding.
        tasks_shown = True if any(r.finding == "task-imbalance" for r in self.all_ranges) else "legendonly"
        for i, (label, key, s) in enumerate(self.view.group("task_losses")):
            r = ds.reduce_series(s, keep_ranges=self.keep)
            self.count(p, r)
            traces += line_traces(key, r, colours[i % len(colours)], dash="dot", width=1.2, visible=tasks_shown)
        log = _positive_spread(np.concatenate(spread_src)) > 100
        layout = base_layout()
        layout["yaxis"] = _axis("loss", type="log" if log else "linear")
        p.log_axis = "yaxis"
        return self.finish(p, traces, layout)

    # 2. gradient norms
    def grad(self) -> Panel:
        p = Panel("grad", TITLES["grad"])
        total = self.reduce("grad_norm")
        group = self.view.group("layer_grad_norms")
        if total is None and not group:
            p.missing = WHAT_TO_LOG["grad"]
            return p
        traces: list[dict] = []
        layout = base_layout(height=300)
        layer_ranges = [r for r in self.ranges_by_panel["grad"] if r.metric in {k for _, k, _ in group}]
        top_ranges = [r for r in self.ranges_by_panel["grad"] if r not in layer_ranges]
        if total is not None:
            traces += self.behind("grad_norm") + line_traces(total[0], total[1], GREEN)
            self.count(p, total[1])
            spread = _positive_spread(total[1].values)
            layout["yaxis"] = _axis("total grad norm", type="log" if spread > 100 else "linear")
            p.log_axis = "yaxis"
        else:
            p.notes.append(PARTIAL["grad_norm"])
        extra = []
        layer_keys: tuple[str, ...] = ()
        if group:
            grid = ds.layer_grid(group)
            layer_keys = grid.keys
            p.points_logged += grid.original
            p.points_shown += grid.kept
            traces += heatmap_traces(grid, yaxis="y2" if total is not None else "y")
            rows = len(grid.labels)
            heat_h = int(min(600, max(240, 10 * rows)))
            if total is not None:
                top_h = 190
                layout["height"] = top_h + heat_h + 90
                split = heat_h / (top_h + heat_h)
                layout["yaxis"]["domain"] = [split + 0.06, 1.0]
                layout["yaxis2"] = _layer_axis(grid, [0.0, split])
                layout["xaxis"]["anchor"] = "y2"
                extra.append(("y8", "y2", layer_ranges, True))
            else:
                layout["height"] = heat_h + 90
                layout["yaxis"] = _layer_axis(grid, [0.0, 1.0])
                extra.append(("y8", "y", top_ranges + layer_ranges, True))
                top_ranges = []
        else:
            p.notes.append(PARTIAL["layer_grad_norms"])
        self.ranges_by_panel["grad"] = top_ranges
        return self.finish(p, traces, layout, extra=extra, rows=layer_keys)

    # 3. optimizer
    def optim(self) -> Panel:
        p = Panel("optim", TITLES["optim"])
        lr, mom = self.reduce("lr"), self.reduce("momentum")
        if lr is None and mom is None:
            p.missing = WHAT_TO_LOG["optim"]
            return p
        traces: list[dict] = []
        layout = base_layout(height=300)
        axes = iter(("y", "y2"))
        for role, item, colour, dash, title in (("lr", lr, BLUE, "solid", "learning rate"),
                                                ("momentum", mom, PURPLE, "dash", "momentum / beta1")):
            if item is None:
                p.notes.append(PARTIAL[role])
                continue
            axis = next(axes)
            traces += self.behind(role, yaxis=axis) + line_traces(item[0], item[1], colour, dash=dash, yaxis=axis, width=2)
            self.count(p, item[1])
            spec = _axis(title, title_font={"color": colour}, tickfont={"color": colour})
            fixed = flat_range(item[1].values)
            if fixed:
                spec["range"] = fixed
            if axis == "y2":
                spec.update(overlaying="y", side="right", showgrid=False, tickmode="auto")
            layout["yaxis" + axis[1:]] = spec
        return self.finish(p, traces, layout)

    # 4. system
    def system(self) -> Panel:
        p = Panel("system", TITLES["system"])
        util = self.reduce("gpu_util")
        times = [(role, self.reduce(role)) for role in ("step_time", "data_time", "compute_time")]
        if util is None and all(t is None for _, t in times):
            p.missing = WHAT_TO_LOG["system"]
            return p
        traces: list[dict] = []
        layout = base_layout(height=300)
        time_axis = "y"
        if util is not None:
            traces += self.behind("gpu_util") + line_traces(util[0], util[1], GREEN, width=1.4)
            self.count(p, util[1])
            layout["yaxis"] = _axis("GPU utilization (%)", range=[0, 105], title_font={"color": GREEN}, tickfont={"color": GREEN})
            time_axis = "y2"
        else:
            p.notes.append(PARTIAL["gpu_util"])
        style = {"step_time": (BLACK, "solid"), "data_time": (VERMILLION, "dot"), "compute_time": (BLUE, "dash")}
        logged = [(role, item) for role, item in times if item is not None]
        # Canonical unit is seconds; sub-second steps read better in milliseconds.
        peak = max((float(np.max(np.abs(it[1].values))) for _, it in logged if len(it[1].values)), default=0.0)
        factor, unit = (1000.0, "ms") if 0 < peak < 1 else (1.0, "s")
        logged = [(role, (key, _scaled(red, factor))) for role, (key, red) in logged]
        fixed = flat_range(*[item[1].values for _, item in logged])
        for role, item in logged:
            colour, dash = style[role]
            if role == "step_time":
                traces += self.behind("step_time", yaxis=time_axis, factor=factor)
            traces += line_traces(item[0], item[1], colour, dash=dash, yaxis=time_axis, width=1.4)
            self.count(p, item[1])
        if logged:
            spec = _axis(f"{unit} per step", rangemode="tozero", **({"range": fixed} if fixed else {}))
            if time_axis == "y2":
                spec.update(overlaying="y", side="right", showgrid=False, tickmode="auto")
            layout["yaxis" + time_axis[1:]] = spec
        any_time = bool(logged)
        if dict(times)["step_time"] is None and any_time is False:
            p.notes.append(PARTIAL["step_time"])
        if dict(times)["data_time"] is None:
            p.notes.append(PARTIAL["data_time"])
        return self.finish(p, traces, layout)


def _layer_axis(grid: ds.Grid, domain: list[float]) -> dict[str, Any]:
    return _axis("layer (model order)", domain=domain, type="category", autorange="reversed",
                 showgrid=False, tickfont={"size": 10}, categoryorder="array", nticks=min(len(grid.labels), 40),
                 categoryarray=[plot_text(x) for x in grid.labels])


def _scaled(r: ds.Reduced, factor: float) -> ds.Reduced:
    if factor == 1.0:
        return r
    markers = tuple(ds.Markers(m.kind, m.steps, m.y * factor, m.counts, m.last_steps) for m in r.markers)
    return ds.Reduced(r.steps, r.values * factor, r.original, markers)


def _decade_ticks(zmin: float, zmax: float) -> tuple[list[float], list[str]]:
    lo, hi = math.ceil(zmin), math.floor(zmax)
    if hi - lo >= 2:  # three or more whole decades inside the range
        step = max(1, (hi - lo) // 8)
        vals = [float(v) for v in range(lo, hi + 1, step)]
        return vals, [f"1e{int(v)}" for v in vals]
    vals = list(np.linspace(zmin, zmax, 5))
    return [float(v) for v in vals], [f"{10 ** v:.3g}" for v in vals]


def heatmap_traces(grid: ds.Grid, yaxis: str) -> list[dict[str, Any]]:
    """Per-layer norms, log10 colour (the bucket maximum, so spikes show) and NaN/Inf markers."""
    high = grid.high
    positive = high[np.isfinite(high) & (high > 0)]
    floor = float(positive.min()) / 10 if len(positive) else 1e-12
    z = np.log10(np.where(np.isfinite(high), np.maximum(high, floor), np.nan))
    finite_z = z[np.isfinite(z)]
    zmin, zmax = (float(finite_z.min()), float(finite_z.max())) if len(finite_z) else (-1.0, 1.0)
    if zmax - zmin < 1e-9:
        zmin, zmax = zmin - 0.5, zmax + 0.5
    vals, text = _decade_ticks(zmin, zmax)
    labels = [plot_text(x) for x in grid.labels]
    custom = np.stack([grid.high, grid.low], axis=-1)
    if grid.exact:
        value = "grad norm %{customdata[0]:.3g}"
        where = "step %{x:,.0f}"
    else:
        value = "grad norm max %{customdata[0]:.3g}, min %{customdata[1]:.3g}"
        where = "steps around %{x:,.0f}"
    traces = [{
        "type": "heatmap", "x": step_array(grid.x), "y": labels, "z": typed_array(z, "f4"),
        "customdata": typed_array(custom, "f4"), "yaxis": yaxis, "xaxis": "x",
        "colorscale": "Viridis", "zmin": zmin, "zmax": zmax, "hoverongaps": False, "name": "per-layer grad norm",
        "colorbar": {"title": {"text": "layer grad norm", "side": "right"}, "tickvals": vals, "ticktext": text,
                     "thickness": 12, "len": 0.62, "y": 0, "yanchor": "bottom", "outlinewidth": 0},
        "hovertemplate": f"%{{y}}<br>{where}<br>{value}<extra></extra>",
        "meta": {"layers": len(labels), "columns": len(grid.x), "original": grid.original},
    }]
    if grid.bad:
        # Non-finite cells are painted as a solid vermillion block (not in Viridis, so it cannot be
        # read as a value), and the start of each run of them gets one marker for the legend/hover.
        block = np.full(grid.high.shape, np.nan, dtype=np.float32)
        for c, r, _ in grid.bad:
            block[r, c] = 1.0
        traces.append({
            "type": "heatmap", "x": step_array(grid.x), "y": labels, "z": typed_array(block, "f4"), "yaxis": yaxis,
            "xaxis": "x", "colorscale": [[0, VERMILLION], [1, VERMILLION]], "showscale": False, "hoverongaps": False,
            "zmin": 0, "zmax": 1, "name": "layer grad norm: NaN/Inf",
            "hovertemplate": "%{y}<br>step %{x:,.0f}<br>NaN/Inf<extra></extra>", "meta": {"nonfinite_cells": len(grid.bad)},
        })
        starts = [i for i, (c, r, _) in enumerate(grid.bad)
                  if i == 0 or grid.bad[i - 1][1] != r or grid.bad[i - 1][0] != c - 1]
        cols = np.array([grid.bad[i][0] for i in starts])
        traces.append({
            "type": "scatter", "mode": "markers", "name": "layer grad norm: NaN/Inf",
            "x": step_array(grid.x[cols]), "y": [labels[grid.bad[i][1]] for i in starts], "yaxis": yaxis,
            "text": [grid.bad[i][2] for i in starts],
            "marker": {"symbol": "x-thin-open", "size": 9, "color": BLACK, "line": {"width": 2, "color": BLACK}},
            "hovertemplate": "%{y}<br>%{text} from step %{x:,.0f}<extra></extra>",
            "meta": {"nonfinite": "layers", "count": len(grid.bad)},
        })
    return traces


def build_panels(view: RoleView, report: HealthReport) -> list[Panel]:
    """The four panels, in order, for one run."""
    b = _Builder(view, finding_ranges(report), dict(report.group) if report.group else None)
    return [b.loss(), b.grad(), b.optim(), b.system()]
