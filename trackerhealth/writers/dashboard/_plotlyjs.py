"""plotly.js for the pages: embedded once per page (compressed), or one shared copy per folder.

The bundle that ships with the ``plotly`` package is ~4.8 MB of JavaScript: embedded as is it
alone would exceed the 5 MB page budget. A page uploaded on its own (the MLflow artifact, the W&B
run file, ``report --html run.html``) embeds it gzip-compressed and base64-encoded (~2 MB) and
inflates it with the browser's own ``DecompressionStream`` — no CDN, no request, nothing fetched,
so the page works offline, from ``file://`` and in the sandboxed iframes the trackers' viewers use.

Many pages in one folder (``report --html folder/``) would repeat those 2 MB per run (5,000 runs:
about 10 GB), so there the bundle is written once as ``plotly.min.js`` at the folder's root and
each page loads it with a relative ``<script src>`` (:func:`write_shared`, :func:`script_tags`).
"""

from __future__ import annotations

import base64
import functools
import gzip
import html
import os
import threading
from pathlib import Path

INSTALL_HINT = "the dashboard needs Plotly: pip install 'trackerhealth[dashboard]'"


class DashboardDependencyError(ImportError):
    """Plotly is not installed; the message says what to install."""


def require_plotly():
    try:
        import plotly.offline
    except ImportError as exc:  # pragma: no cover - exercised by monkeypatching in tests
        raise DashboardDependencyError(INSTALL_HINT) from exc
    return plotly.offline


@functools.lru_cache(maxsize=1)
def bundle() -> tuple[str, str]:
    """``(plotly.js version, base64 of the gzip-compressed bundle)``; computed once per process.

    ``mtime=0`` keeps the bytes identical between scans, so re-writing an unchanged run's dashboard
    changes nothing.
    """
    offline = require_plotly()
    source = offline.get_plotlyjs().encode("utf-8")
    packed = gzip.compress(source, compresslevel=9, mtime=0)
    return offline.get_plotlyjs_version(), base64.b64encode(packed).decode("ascii")


SHARED_NAME = "plotly.min.js"


def write_shared(directory: str | os.PathLike) -> Path:
    """Write the bundle as ``directory/plotly.min.js`` (only when its bytes changed, so an unchanged
    folder stays unchanged); returns the path."""
    path = Path(directory) / SHARED_NAME
    try:
        st = path.stat()
        # Called once per page: a stat, not a 4.8 MB read, when this process already wrote or checked it.
        if _checked.get(str(path.resolve())) == (st.st_size, st.st_mtime_ns):
            return path
    except OSError:
        st = None
    data = _shared_bytes()
    if st is None or st.st_size != len(data) or path.read_bytes() != data:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}-{threading.get_ident()}")
        tmp.write_bytes(data)
        os.replace(tmp, path)
        st = path.stat()
    _checked[str(path.resolve())] = (st.st_size, st.st_mtime_ns)
    return path


_checked: dict[str, tuple[int, int]] = {}


@functools.lru_cache(maxsize=1)
def _shared_bytes() -> bytes:
    return require_plotly().get_plotlyjs().encode("utf-8")


# Inflates the embedded bundle, runs it as an inline script (no eval, no blob: URL) and resolves
# with window.Plotly. Kept small and dependency-free.
LOADER_JS = r"""
function thLoadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  var holder = document.getElementById('th-plotlyjs');
  if (!holder) {
    var shared = document.getElementById('th-plotlyjs-shared');
    return Promise.reject(new Error(shared
      ? 'the charting library ' + shared.getAttribute('src') + ' was not found next to this page; keep the folder together (it was written with the pages)'
      : 'plotly.js is not embedded in this page'));
  }
  if (typeof DecompressionStream === 'undefined') {
    return Promise.reject(new Error('this browser cannot inflate the embedded charting library (needs DecompressionStream: Chrome 80+, Firefox 113+, Safari 16.4+)'));
  }
  var raw = atob(holder.textContent.trim());
  var bytes = new Uint8Array(raw.length);
  for (var i = 0; i < raw.length; i++) bytes[i] = raw.charCodeAt(i);
  var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return new Response(stream).text().then(function (src) {
    var s = document.createElement('script');
    s.textContent = src;
    document.head.appendChild(s);
    if (!window.Plotly) throw new Error('plotly.js did not load');
    return window.Plotly;
  });
}
"""


def script_tags(shared_src: str | None = None) -> str:
    """The bundle and its loader, for the page's ``<head>``: embedded, or with ``shared_src`` (a
    relative URL such as ``../plotly.min.js``) loaded from the folder's one shared copy."""
    if shared_src is not None:
        version = require_plotly().get_plotlyjs_version()
        # The shared copy runs before the loader, so thLoadPlotly finds window.Plotly already set.
        return (f'<script id="th-plotlyjs-shared" src="{html.escape(shared_src, quote=True)}" '
                f'data-plotly-version="{version}"></script>\n<script>{LOADER_JS}</script>')
    version, packed = bundle()
    return (
        f'<script type="application/octet-stream" id="th-plotlyjs" data-plotly-version="{version}" '
        f'data-encoding="gzip+base64">{packed}</script>\n<script>{LOADER_JS}</script>'
    )
