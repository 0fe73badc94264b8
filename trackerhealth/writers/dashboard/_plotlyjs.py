"""plotly.js, embedded once per page, compressed.

The bundle that ships with the ``plotly`` package is ~4.8 MB of JavaScript: embedded as is it
alone would exceed the 5 MB page budget. It is embedded gzip-compressed and base64-encoded
(~2 MB) and the page inflates it with the browser's own ``DecompressionStream`` — no CDN, no
request, nothing fetched, so the page works offline, from ``file://`` and in the sandboxed
iframes the trackers' viewers use.
"""

from __future__ import annotations

import base64
import functools
import gzip

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


# Inflates the embedded bundle, runs it as an inline script (no eval, no blob: URL) and resolves
# with window.Plotly. Kept small and dependency-free.
LOADER_JS = r"""
function thLoadPlotly() {
  if (window.Plotly) return Promise.resolve(window.Plotly);
  var holder = document.getElementById('th-plotlyjs');
  if (!holder) return Promise.reject(new Error('plotly.js is not embedded in this page'));
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


def script_tags() -> str:
    """The embedded bundle and its loader, for the page's ``<head>``."""
    version, packed = bundle()
    return (
        f'<script type="application/octet-stream" id="th-plotlyjs" data-plotly-version="{version}" '
        f'data-encoding="gzip+base64">{packed}</script>\n<script>{LOADER_JS}</script>'
    )
