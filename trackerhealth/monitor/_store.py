"""Bounded per-metric storage for the in-training monitor.

One :class:`KeyStore` per metric key. While a key has at most ``cap`` points it keeps every point,
so the history the monitor analyses is exactly the one a later scan reads. Past ``cap`` it keeps
equal-width buckets instead (widths double, ``cap`` buckets at most), and per bucket:

* one raw point drawn uniformly at random — a sample keeps the series' level, trend, noise and
  NaN fraction, which is what the diagnoses measure (a bucket mean or median would smooth away
  the point-to-point noise that ``loss-oscillation`` judges);
* the bucket's first non-finite point — so the first NaN/Inf step of the run stays exact;
* the bucket's largest finite point — so a loss spike survives when the sample misses it;
* the point count.

:meth:`KeyStore.points` turns that back into one series in log order: the samples, plus each
bucket's first non-finite point, plus (for loss-like keys) each bucket maximum that stands out as
a spike against the samples' rolling median — the same test ``periodic-spikes`` applies. Memory is
O(``cap``) per key whatever the run's length; adding n points costs O(n).
"""

from __future__ import annotations

import numpy as np

from .. import stats

_NONE = -1  # "no such point" in position columns


class _Columns:
    """Growable numpy columns of one length (amortized O(1) append)."""

    def __init__(self, dtypes: dict[str, type], capacity: int = 256):
        self.dtypes = dtypes
        self.size = 0
        self.cols = {name: np.empty(capacity, dtype=dt) for name, dt in dtypes.items()}

    def __getitem__(self, name: str) -> np.ndarray:
        return self.cols[name][: self.size]

    def append(self, **cols: np.ndarray) -> None:
        n = len(next(iter(cols.values())))
        need = self.size + n
        cap = len(next(iter(self.cols.values())))
        if need > cap:
            new_cap = max(need, 2 * cap)
            for name, arr in self.cols.items():
                grown = np.empty(new_cap, dtype=arr.dtype)
                grown[: self.size] = arr[: self.size]
                self.cols[name] = grown
        for name, values in cols.items():
            self.cols[name][self.size: need] = values
        self.size = need

    def truncate(self, size: int) -> None:
        self.size = size

    def shrink(self) -> None:
        """Give back capacity beyond twice the size (cheap: only when it is over four times)."""
        cap = len(next(iter(self.cols.values())))
        if cap > 4 * max(self.size, 64):
            keep = 2 * max(self.size, 64)
            self.cols = {name: arr[:keep].copy() for name, arr in self.cols.items()}

    @property
    def nbytes(self) -> int:
        return sum(a.nbytes for a in self.cols.values())


_RAW = {"pos": np.int64, "s": np.float64, "v": np.float64, "w": np.float64}
_BUCKETS = {
    "pos": np.int64, "s": np.float64, "v": np.float64, "w": np.float64, "n": np.int64,
    "hi_pos": np.int64, "hi_s": np.float64, "hi_v": np.float64,
    "bad_pos": np.int64, "bad_s": np.float64, "bad_v": np.float64,
}


def _reduce(pos, s, v, w, width: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Buckets of ``width`` consecutive raw points (len(v) is a multiple of width)."""
    k = len(v) // width
    P, S, V, Wt = (a.reshape(k, width) for a in (pos, s, v, w))
    rows = np.arange(k)
    pick = rng.integers(0, width, k)
    finite = np.isfinite(V)
    hi = np.where(finite, V, -np.inf).argmax(axis=1)
    has_hi = finite[rows, hi]
    bad = (~finite).argmax(axis=1)
    has_bad = ~finite[rows, bad]
    return {
        "pos": P[rows, pick], "s": S[rows, pick], "v": V[rows, pick], "w": Wt[rows, pick],
        "n": np.full(k, width, dtype=np.int64),
        "hi_pos": np.where(has_hi, P[rows, hi], _NONE), "hi_s": S[rows, hi],
        "hi_v": np.where(has_hi, V[rows, hi], -np.inf),
        "bad_pos": np.where(has_bad, P[rows, bad], _NONE), "bad_s": S[rows, bad], "bad_v": V[rows, bad],
    }


class KeyStore:
    """Every point of one metric up to ``cap`` points; bounded buckets beyond (see module doc)."""

    def __init__(self, cap: int, rng: np.random.Generator, spiky: bool = False):
        if cap < 16:
            raise ValueError(f"cap must be at least 16 points per key, not {cap}")
        self.cap = cap
        self.rng = rng
        self.spiky = spiky  # inject stand-out bucket maxima (loss-like keys)
        self.width = 1  # raw points per bucket; 1 = exact
        self.n_raw = 0
        self.raw = _Columns(_RAW)  # exact points (width 1), or the open bucket (< width points)
        self.buckets: _Columns | None = None
        self.first_bad: tuple[float, float] | None = None  # (step, value) of the first NaN/Inf

    # -- adding ---------------------------------------------------------------------------------
    def extend(self, s: np.ndarray, v: np.ndarray, w: np.ndarray) -> None:
        n = len(v)
        if n == 0:
            return
        pos = np.arange(self.n_raw, self.n_raw + n, dtype=np.int64)
        self.n_raw += n
        if self.first_bad is None:
            bad = ~np.isfinite(v)
            if bad.any():
                i = int(bad.argmax())
                self.first_bad = (float(s[i]), float(v[i]))
        self.raw.append(pos=pos, s=s, v=v, w=w)
        if self.buckets is None:
            if self.raw.size <= self.cap:
                return
            self.buckets = _Columns(_BUCKETS, capacity=self.cap + 2)
            self.width = 2
        self._close_full_buckets()
        while self.buckets.size > self.cap:
            self._halve()
        self.buckets.shrink()

    def _close_full_buckets(self) -> None:
        raw, width = self.raw, self.width
        k = raw.size // width
        if k == 0:
            return
        m = k * width
        self.buckets.append(**_reduce(raw["pos"][:m], raw["s"][:m], raw["v"][:m], raw["w"][:m], width, self.rng))
        rest = {name: raw[name][m:].copy() for name in _RAW}
        raw.truncate(0)
        if len(rest["v"]):
            raw.append(**rest)
        raw.shrink()  # the exact phase may have grown it to cap + one flush

    def _halve(self) -> None:
        """Merge adjacent bucket pairs: half the buckets, twice the width (a lone last one stays)."""
        b = self.buckets
        m = b.size // 2
        a_, b_ = slice(0, 2 * m, 2), slice(1, 2 * m, 2)
        na, nb = b["n"][a_], b["n"][b_]
        take_b = self.rng.random(m) * (na + nb) >= na  # the merged sample stays uniform
        merged = {}
        for name in ("pos", "s", "v", "w"):
            merged[name] = np.where(take_b, b[name][b_], b[name][a_])
        hi_b = b["hi_v"][b_] > b["hi_v"][a_]
        for name in ("hi_pos", "hi_s", "hi_v"):
            merged[name] = np.where(hi_b, b[name][b_], b[name][a_])
        bad_b = b["bad_pos"][a_] == _NONE
        for name in ("bad_pos", "bad_s", "bad_v"):
            merged[name] = np.where(bad_b, b[name][b_], b[name][a_])
        merged["n"] = na + nb
        lone = {name: b[name][2 * m:].copy() for name in _BUCKETS}
        b.truncate(0)
        b.append(**merged)
        if len(lone["n"]):
            b.append(**lone)
        self.width *= 2

    # -- reading --------------------------------------------------------------------------------
    @property
    def exact(self) -> bool:
        return self.buckets is None

    @property
    def nbytes(self) -> int:
        return self.raw.nbytes + (self.buckets.nbytes if self.buckets is not None else 0)

    def points(self, z: float = 6.0, min_rel: float = 0.15, window: int = 9) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(steps, values, wall_times)`` in log order: every point, or the bucket view."""
        raw = self.raw
        if self.buckets is None:
            return raw["s"].copy(), raw["v"].copy(), raw["w"].copy()
        b = self.buckets
        pos, s, v, w = (np.concatenate((b[c], raw[c])) for c in ("pos", "s", "v", "w"))
        n = np.concatenate((b["n"], np.ones(raw.size, dtype=np.int64)))
        extra_pos, extra_s, extra_v, extra_w = [], [], [], []
        # The first NaN/Inf of a bucket whose sample is finite.
        bad = (b["bad_pos"] != _NONE) & np.isfinite(b["v"])
        extra_pos.append(b["bad_pos"][bad]); extra_s.append(b["bad_s"][bad])
        extra_v.append(b["bad_v"][bad]); extra_w.append(b["w"][bad])
        if self.spiky and len(v) >= 5:
            hit = self._spikes(b, s, v, n, z, min_rel, window)
            extra_pos.append(b["hi_pos"][hit]); extra_s.append(b["hi_s"][hit])
            extra_v.append(b["hi_v"][hit]); extra_w.append(b["w"][hit])
        pos = np.concatenate([pos, *extra_pos])
        order = np.argsort(pos, kind="stable")
        return (np.concatenate([s, *extra_s])[order], np.concatenate([v, *extra_v])[order],
                np.concatenate([w, *extra_w])[order])

    def _spikes(self, b: _Columns, s, v, n, z: float, min_rel: float, window: int) -> np.ndarray:
        """Buckets whose maximum is a spike against the samples' rolling median (stats.spikes' test)."""
        nb = b.size
        finite = np.isfinite(v)
        base = np.full(len(v), np.nan)
        if finite.sum() < 5:
            return np.zeros(nb, dtype=bool)
        base[finite] = stats.rolling_median(v[finite], window)
        # Carry the level over non-finite samples from the last finite one.
        idx = np.where(finite, np.arange(len(v)), 0)
        np.maximum.accumulate(idx, out=idx)
        base = base[idx]
        scale = stats.mad((v - base)[finite])
        if not np.isfinite(scale) or scale == 0:
            scale = np.finfo(float).eps
        hi = b["hi_v"]
        excess = hi - base[:nb]
        return ((b["hi_pos"] != _NONE) & (b["hi_pos"] != b["pos"]) & (excess > z * scale)
                & (excess > min_rel * (np.abs(base[:nb]) + 1e-12)))
