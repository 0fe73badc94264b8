"""Summaries of a generated run and self-checks that its fault really happened.

The checks encode the *definition* of each fault (as written in the corpus brief),
not any detector's thresholds: e.g. "vanishing gradients" means the first layer's
gradient norm really is below 1e-7 while the last layer's is normal. They guard the
corpus against silently losing a fault when numpy, a seed or a scenario changes.
"""

from __future__ import annotations

import numpy as np


def _arr(log, key):
    s, v = log.series(key)
    return np.asarray(s, dtype=float), np.asarray(v, dtype=float)


def _g(x):
    return f"{x:.3g}"


def _head_tail(v, frac=0.1):
    k = max(1, int(len(v) * frac))
    return float(np.nanmean(v[:k])), float(np.nanmean(v[-k:]))


def summarize(sc, log) -> str:
    k = sc.keys
    parts = []
    if "loss" in k:
        s, v = _arr(log, k["loss"])
        fin = np.isfinite(v)
        bad = (~fin).sum()
        fv = v[fin]
        txt = (
            f"{k['loss']}: n={len(v)} steps {int(s[0])}..{int(s[-1])} first={_g(v[0])} "
            f"min={_g(fv.min())} max={_g(fv.max())} last={_g(v[-1])}"
        )
        if bad:
            txt += f" nonfinite={bad} from step {int(s[~fin][0])}"
        else:
            h, t = _head_tail(v)
            txt += f" head10%={_g(h)} tail10%={_g(t)}"
        parts.append(txt)
    if "val" in k:
        s, v = _arr(log, k["val"])
        if len(v):
            fin = np.isfinite(v)
            i = int(np.nanargmin(np.where(fin, v, np.nan))) if fin.any() else 0
            parts.append(f"{k['val']}: n={len(v)} first={_g(v[0])} min={_g(v[i])}@{int(s[i])} last={_g(v[-1])}")
    if "grad" in k:
        _, v = _arr(log, k["grad"])
        fv = v[np.isfinite(v)]
        if len(fv):
            parts.append(
                f"{k['grad']}: median={_g(np.median(fv))} max={_g(fv.max())}"
                + (f" nonfinite={int((~np.isfinite(v)).sum())}" if (~np.isfinite(v)).any() else "")
            )
    if "layers" in k:
        L = k["layers"]
        first = _arr(log, L[0])[1]
        last = _arr(log, L[-1])[1]
        parts.append(
            f"layer grads: {L[0]} median={_g(np.median(first))} max={_g(first.max())}; "
            f"{L[-1]} median={_g(np.median(last))}"
        )
    if "data_time" in k:
        d = np.mean(_arr(log, k["data_time"])[1])
        c = np.mean(_arr(log, k["compute_time"])[1])
        u = np.mean(_arr(log, k["util"])[1])
        unit = k.get("time_unit", "s")
        parts.append(f"mean data={_g(d)}{unit} compute={_g(c)}{unit} util={u:.1f}%")
    if "tasks" in k:
        for t in k["tasks"]:
            h, tl = _head_tail(_arr(log, t)[1])
            parts.append(f"{t}: head={_g(h)} tail={_g(tl)}")
        if "dominant" in k:
            parts.append(f"share of {k['dominant']} = {_task_share(log, k):.4f}")
    return "; ".join(parts)


def _task_share(log, k):
    _, dom = _arr(log, k["dominant"])
    tot = sum(_arr(log, t)[1] for t in k["tasks"])
    return float(np.nanmean(dom / tot))


def _slope(s, v):
    """Least-squares slope of v against s (per step)."""
    if len(v) < 3:
        return 0.0
    return float(np.polyfit(s, v, 1)[0])


def check(sc, log):
    """Return (ok, notes) for every fault listed on the scenario, or the healthy criteria."""
    k = sc.keys
    notes, ok = [], True

    def need(cond, msg):
        nonlocal ok
        ok = ok and bool(cond)
        notes.append(("" if cond else "NOT ") + msg)

    s, v = _arr(log, k["loss"]) if "loss" in k else (np.array([]), np.array([]))
    faults = set(sc.faults)
    if "nonfinite" in faults:
        vv = np.concatenate([v, _arr(log, k["val"])[1]]) if "val" in k else v
        need((~np.isfinite(vv)).any(), "loss/val non-finite")
        if "grad" in k:
            _, gv = _arr(log, k["grad"])
            pre = gv[: np.argmax(~np.isfinite(gv))] if (~np.isfinite(gv)).any() else gv
            if len(pre) > 5:
                base = np.median(pre[: max(3, len(pre) // 2)])
                notes.append(
                    f"grad norm before non-finite: max {np.nanmax(pre):.3g} = {np.nanmax(pre) / base:.3g}x median"
                )
    if "overfitting" in faults:
        h, t = _head_tail(v)
        vs, vv = _arr(log, k["val"])
        i = int(np.argmin(vv))
        need(t < 0.25 * h, f"train falls {h:.3g}->{t:.3g}")
        need(vv[-1] > 1.3 * vv[i] and i < 0.7 * len(vv), f"val rises {vv[i]:.3g}@{int(vs[i])}->{vv[-1]:.3g}")
    if "slow-convergence" in faults:
        h, t = _head_tail(v, 0.05)
        n = len(v)
        tail_slope = _slope(s[-n // 5 :], v[-n // 5 :])
        need(0.88 <= t / h <= 0.995, f"tail/head={t / h:.3f}")
        need(tail_slope < 0, f"slope over last 20% {tail_slope:.3g}/step")
    if "loss-oscillation" in faults:
        fin = np.isfinite(v)
        sv, vv = s[fin], v[fin]
        n = len(vv)
        body_s, body_v = sv[n // 10 :], vv[n // 10 :]
        h, t = _head_tail(body_v, 0.2)
        level = float(np.mean(body_v))
        resid = body_v - np.polyval(np.polyfit(body_s, body_v, 1), body_s)
        cv = float(np.std(resid) / abs(level))
        need(abs(t - h) < 0.25 * level, f"flat trend {h:.3g}->{t:.3g} (level {level:.3g})")
        need(cv > 0.15, f"fluctuation/level={cv:.2f}")
    if "periodic-spikes" in faults:
        # per epoch window: is the largest loss at the corrupted batch's position, and well above the median?
        per, phase = k["period"], k["phase"]
        hits, n_ep, ratios = 0, 0, []
        for start in range(int(s[0]) - (int(s[0]) - phase) % per, int(s[-1]) + 1, per):
            lo, hi = start - per // 2, start + per // 2
            m = (s >= lo) & (s < hi)
            if m.sum() < 0.8 * per / max(1, np.median(np.diff(s))) or start < s[0] + per:
                continue
            n_ep += 1
            w_s, w_v = s[m], v[m]
            j = int(np.argmax(w_v))
            ratios.append(w_v[j] / np.median(w_v))
            hits += abs(w_s[j] - start) <= 2 and w_v[j] > 3 * np.median(w_v)
        need(
            n_ep >= 4 and hits >= 0.8 * n_ep,
            f"{hits}/{n_ep} epochs peak at step = {phase} mod {per} (peak/median {np.median(ratios):.1f}x)",
        )
    if "vanishing-gradients" in faults:
        L = k["layers"]
        first = _arr(log, L[0])[1]
        last = _arr(log, L[-1])[1]
        need(np.median(first) < 1e-7, f"first layer median {np.median(first):.2g} < 1e-7")
        need(np.median(last) > 1e-3, f"last layer median {np.median(last):.2g} > 1e-3")
    if "input-bottleneck" in faults:
        d = np.mean(_arr(log, k["data_time"])[1])
        c = np.mean(_arr(log, k["compute_time"])[1])
        u = np.mean(_arr(log, k["util"])[1])
        need(d > c, f"data {d:.3g} > compute {c:.3g}")
        need(u < 60, f"util {u:.1f}% < 60")
    if "task-imbalance" in faults:
        share = _task_share(log, k)
        h, t = _head_tail(_arr(log, k["flat"])[1])
        need(share > 0.9, f"{k['dominant']} share {share:.3f} > 0.9")
        need(t > 0.9 * h, f"{k['flat']} flat {h:.3g}->{t:.3g}")
    if not faults:
        fin = np.isfinite(v).all()
        need(fin, "finite")
        h, t = _head_tail(v)
        need(t < 0.6 * h, f"loss falls {h:.3g}->{t:.3g}")
        if "val" in k:
            vs, vv = _arr(log, k["val"])
            need(np.isfinite(vv).all() and vv[-1] <= 1.15 * vv.min(), f"val holds {vv.min():.3g}->{vv[-1]:.3g}")
        if "data_time" in k:
            d = np.mean(_arr(log, k["data_time"])[1])
            c = np.mean(_arr(log, k["compute_time"])[1])
            u = np.mean(_arr(log, k["util"])[1])
            need(d < 0.2 * c and u > 80, f"fast loader data {d:.3g} << compute {c:.3g}, util {u:.1f}%")
        if "layers" in k:
            L = k["layers"]
            first = _arr(log, L[0])[1]
            last = _arr(log, L[-1])[1]
            need(np.median(first) > 1e-4 * np.median(last), "first-layer grads not vanishing")
        if "tasks" in k:
            for t_key in k["tasks"]:
                hh, tt = _head_tail(_arr(log, t_key)[1])
                need(tt < 0.7 * hh, f"{t_key} learns {hh:.3g}->{tt:.3g}")
    return ok, "; ".join(notes)
