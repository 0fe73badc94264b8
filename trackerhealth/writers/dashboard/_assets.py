"""Style sheet and scripts of the dashboard pages (inline: the pages are single self-contained files).

The scripts read only the JSON data island and the DOM, never ``innerHTML`` with data: untrusted
text from a run is inserted already escaped by the server side, or with ``textContent``.
"""

# Blocks every request the page could make (scripts and styles are inline, images are data: URIs
# from Plotly's own "download as PNG"), so the page cannot reach the network even if something
# slipped through escaping.
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "img-src data: blob:; font-src data:; base-uri 'none'; form-action 'none'")
# A page of a report folder loads the folder's one shared plotly.min.js: a script of its own origin.
CSP_SHARED_SCRIPT = CSP.replace("script-src 'unsafe-inline'", "script-src 'self' 'unsafe-inline'")

CSS = r"""
:root { --ok:#009E73; --warning:#B07800; --critical:#D55E00; --ink:#1f2328; --muted:#59636e;
  --line:#d1d9e0; --bg:#f6f8fa; --card:#ffffff; --accent:#0072B2; }
* { box-sizing: border-box; }
body { margin:0; background:var(--bg); color:var(--ink); font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif; }
main { max-width:1180px; margin:0 auto; padding:20px 20px 40px; }
h1 { font-size:22px; margin:0 0 4px; overflow-wrap:anywhere; }
h2 { font-size:16px; margin:0; }
a { color:var(--accent); }
code { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12.5px; background:#eef1f4; padding:1px 4px; border-radius:4px; overflow-wrap:anywhere; }
.meta { color:var(--muted); display:flex; flex-wrap:wrap; gap:4px 14px; align-items:center; }
.group { color:var(--muted); margin-top:6px; }
.tags { display:flex; flex-wrap:wrap; gap:4px; margin-top:6px; }
.tag { background:#eef1f4; border:1px solid var(--line); border-radius:10px; padding:0 8px; font-size:12px; overflow-wrap:anywhere; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:14px 16px; margin-top:16px; }
.scorecard { display:grid; grid-template-columns: 170px repeat(auto-fit, minmax(140px, 1fr)); gap:10px; align-items:stretch; }
.overall { border-radius:8px; padding:10px 12px; color:#fff; display:flex; flex-direction:column; justify-content:center; }
.overall .num { font-size:38px; font-weight:700; line-height:1; }
.overall .lbl { font-size:12px; opacity:.95; text-transform:uppercase; letter-spacing:.04em; }
.status-ok { background:var(--ok); } .status-warning { background:var(--warning); } .status-critical { background:var(--critical); }
.status-none, .status-other { background:#6e7781; }
.status-box { border-left:4px solid #6e7781; background:#f3f4f6; padding:8px 12px; border-radius:0 6px 6px 0; margin:8px 0; }
.status-box strong { text-transform:uppercase; letter-spacing:.03em; }
.back { display:inline-block; margin-bottom:8px; font-size:13px; }
.dim .basis { font-size:11.5px; color:var(--muted); overflow-wrap:anywhere; margin-top:3px; }
.dim { border:1px solid var(--line); border-radius:8px; padding:8px 10px; }
.dim .name { font-size:12px; color:var(--muted); }
.dim .num { font-size:22px; font-weight:650; }
.dim .why { font-size:11.5px; color:var(--muted); }
.bar { height:6px; background:#eef1f4; border-radius:3px; overflow:hidden; margin-top:4px; }
.bar > span { display:block; height:100%; }
.good { background:var(--ok); } .fair { background:#E69F00; } .poor { background:var(--critical); }
.badge { display:inline-block; font-size:11px; font-weight:700; padding:1px 7px; border-radius:10px; color:#fff; letter-spacing:.03em; }
.badge.critical { background:var(--critical); } .badge.warning { background:var(--warning); }
.badge.ok { background:var(--ok); } .badge.skipped, .badge.error, .badge.other { background:#6e7781; }
.findings { list-style:none; margin:8px 0 0; padding:0; }
.finding { border-left:4px solid var(--line); padding:6px 10px 6px 12px; margin:8px 0; background:#fbfcfd; border-radius:0 6px 6px 0; }
.finding.critical { border-left-color:var(--critical); } .finding.warning { border-left-color:var(--warning); }
.finding .head { display:flex; flex-wrap:wrap; gap:6px 10px; align-items:center; }
.finding p { margin:4px 0; overflow-wrap:anywhere; }
.finding ul { margin:2px 0 4px; padding-left:18px; color:var(--muted); font-size:13px; overflow-wrap:anywhere; }
.fix { font-size:13.5px; }
button { font:inherit; font-size:12px; border:1px solid var(--line); background:#fff; border-radius:6px; padding:2px 9px; cursor:pointer; color:var(--ink); }
button:hover { border-color:var(--accent); }
button[aria-pressed="true"] { background:var(--accent); color:#fff; border-color:var(--accent); }
.panel .head { display:flex; justify-content:space-between; align-items:center; gap:10px; flex-wrap:wrap; }
.toolbar { display:flex; gap:4px; align-items:center; color:var(--muted); font-size:12px; }
.plot { width:100%; min-height:120px; }
.missing { border:2px dashed var(--line); border-radius:8px; padding:18px; margin-top:10px; color:var(--muted); background:#fbfcfd; }
.missing strong { color:var(--ink); }
.notes { margin:6px 0 0; padding-left:18px; color:var(--muted); font-size:12.5px; }
details summary { cursor:pointer; color:var(--muted); }
table.kv { border-collapse:collapse; font-size:12.5px; margin-top:6px; }
table.kv td { border-top:1px solid var(--line); padding:3px 10px 3px 0; vertical-align:top; overflow-wrap:anywhere; }
footer { color:var(--muted); font-size:12px; margin-top:18px; }
.muted { color:var(--muted); }
.hint { font-size:12px; margin-top:8px; }
@media (max-width: 760px) { .scorecard { grid-template-columns: repeat(2, 1fr); } main { padding:12px; } }
"""

RUN_JS = r"""
(function () {
  var body = document.body;
  var data = JSON.parse(document.getElementById('th-data').textContent);
  var plots = [];
  function fail(err) {
    var msg = 'The charts could not be drawn: ' + (err && err.message ? err.message : String(err));
    document.querySelectorAll('.plot').forEach(function (el) {
      var p = document.createElement('p'); p.className = 'missing'; p.textContent = msg; el.appendChild(p);
    });
    body.setAttribute('data-ready', 'error');
    if (window.console) console.warn(msg);
  }
  var syncing = false;
  function setX(range, except) {
    syncing = true;
    var upd = {'xaxis.range': (range || data.xrange).slice()};
    return Promise.all(plots.filter(function (el) { return el !== except; }).map(function (el) {
      return window.Plotly.relayout(el, upd);
    })).then(function () { syncing = false; }, function () { syncing = false; });
  }
  function onRelayout(el) {
    return function (ev) {
      if (syncing || !ev) return;
      if (ev['xaxis.autorange']) { setX(null, null); return; }  // double-click: whole run everywhere
      var r = ev['xaxis.range'] || (ev['xaxis.range[0]'] !== undefined ? [ev['xaxis.range[0]'], ev['xaxis.range[1]']] : null);
      if (r) setX(r, el);
    };
  }
  // Plotly labels the 2s and 5s between decades on a log axis as bare digits ("2, 1, 5, 2, 0.1"):
  // over two or more decades only the powers of ten get a label; a narrower span labels every
  // tick in full ("0.2, 0.5, 1"), so the axis is never left with a single number.
  function logLabels(el) {
    var upd = {}, fl = el._fullLayout;
    Object.keys(fl).forEach(function (name) {
      var ax = fl[name];
      if (!/^yaxis\d*$/.test(name) || !ax || ax.type !== 'log' || !ax.visible || !ax.range) return;
      var want = Math.abs(ax.range[1] - ax.range[0]) >= 2 ? 'none' : 'complete';
      if (ax.minorloglabels !== want) upd[name + '.minorloglabels'] = want;
    });
    return Object.keys(upd).length ? window.Plotly.relayout(el, upd) : Promise.resolve();
  }
  function wire() {
    document.querySelectorAll('[data-scale-for]').forEach(function (btn) {
      btn.addEventListener('click', function () {
        var el = document.getElementById('plot-' + btn.getAttribute('data-scale-for'));
        var upd = {}; upd[btn.getAttribute('data-axis') + '.type'] = btn.getAttribute('data-scale');
        window.Plotly.relayout(el, upd).then(function () { return logLabels(el); });
        btn.parentNode.querySelectorAll('button').forEach(function (b) { b.setAttribute('aria-pressed', String(b === btn)); });
      });
    });
    document.querySelectorAll('[data-zoom-start]').forEach(function (btn) {
      btn.addEventListener('click', function () {
        var a = parseFloat(btn.getAttribute('data-zoom-start')), b = parseFloat(btn.getAttribute('data-zoom-end'));
        var pad = Math.max((b - a) * 0.25, data.span * 0.01, 1);
        setX([a - pad, b + pad], null);
        var first = document.querySelector('.panel'); if (first) first.scrollIntoView({behavior: 'smooth'});
      });
    });
    document.querySelectorAll('[data-reset-zoom]').forEach(function (btn) {
      btn.addEventListener('click', function () { setX(null, null); });
    });
    plots.forEach(function (el) {
      el.on('plotly_relayout', onRelayout(el));
      el.on('plotly_relayout', function (ev) {
        // A zoom changes how many decades are shown; the label change itself ends the chain.
        if (ev && !Object.keys(ev).every(function (k) { return /minorloglabels$/.test(k); })) logLabels(el);
      });
    });
  }
  thLoadPlotly().then(function (Plotly) {
    if (window.performance && performance.mark) performance.mark('th-plotly-loaded');
    var config = {displaylogo: false, responsive: true, scrollZoom: false,
                  modeBarButtonsToRemove: ['select2d', 'lasso2d']};
    return Promise.all(data.panels.map(function (p) {
      var el = document.getElementById('plot-' + p.id);
      plots.push(el);
      return Plotly.newPlot(el, p.figure.data, p.figure.layout, config);
    }));
  }).then(function () {
    return Promise.all(plots.map(logLabels));
  }).then(function () {
    wire();
    if (window.performance && performance.mark) performance.mark('th-ready');
    body.setAttribute('data-ready', '1');
  }, fail);
})();
"""

OVERVIEW_JS = r"""
(function () {
  var table = document.getElementById('runs');
  var tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var filter = document.getElementById('filter'), status = document.getElementById('status-filter');
  var count = document.getElementById('shown');
  function apply() {
    var q = filter.value.trim().toLowerCase(), st = status.value, n = 0;
    rows.forEach(function (r) {
      var show = (!q || r.getAttribute('data-search').indexOf(q) !== -1) && (!st || r.getAttribute('data-status') === st);
      r.hidden = !show; if (show) n++;
    });
    count.textContent = String(n);
  }
  filter.addEventListener('input', apply); status.addEventListener('change', apply);
  table.querySelectorAll('th[data-sort]').forEach(function (th, _) {
    var btn = th.querySelector('button');
    btn.addEventListener('click', function () {
      var col = th.cellIndex, numeric = th.getAttribute('data-sort') === 'num';
      var dir = th.getAttribute('aria-sort') === 'ascending' ? -1 : 1;
      table.querySelectorAll('th[data-sort]').forEach(function (h) { h.removeAttribute('aria-sort'); });
      th.setAttribute('aria-sort', dir === 1 ? 'ascending' : 'descending');
      rows.sort(function (a, b) {
        var x = a.cells[col].getAttribute('data-v'), y = b.cells[col].getAttribute('data-v');
        if (numeric) {
          var fx = x === '' ? Infinity : parseFloat(x), fy = y === '' ? Infinity : parseFloat(y);
          if (fx === fy) return 0;
          if (fx === Infinity) return 1; if (fy === Infinity) return -1;
          return (fx - fy) * dir;
        }
        return x.localeCompare(y) * dir;
      });
      rows.forEach(function (r) { tbody.appendChild(r); });
    });
  });
  apply();
  document.body.setAttribute('data-ready', '1');
})();
"""

OVERVIEW_CSS = r"""
.controls { display:flex; flex-wrap:wrap; gap:8px 14px; align-items:center; margin:10px 0; }
.controls input, .controls select { font:inherit; padding:4px 8px; border:1px solid var(--line); border-radius:6px; }
.controls input { min-width:320px; }
table.runs { width:100%; border-collapse:collapse; background:#fff; font-size:13px; }
table.runs th, table.runs td { border-bottom:1px solid var(--line); padding:6px 8px; text-align:left; vertical-align:top; }
table.runs th { background:#f0f3f6; position:sticky; top:0; font-weight:600; white-space:nowrap; }
table.runs th button { border:0; background:none; padding:0; font-weight:600; font-size:13px; }
table.runs th[aria-sort="ascending"] button::after { content:" \25B2"; }
table.runs th[aria-sort="descending"] button::after { content:" \25BC"; }
table.runs td.num { text-align:right; font-variant-numeric:tabular-nums; white-space:nowrap; }
table.runs td.run { overflow-wrap:anywhere; min-width:160px; }
.pill { display:inline-block; min-width:34px; text-align:center; border-radius:10px; padding:0 6px; color:#fff; font-weight:600; }
.pill.none { background:#d1d9e0; color:var(--ink); }
.fids { display:flex; flex-wrap:wrap; gap:3px 6px; }
.fid { font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace; font-size:12px; border-radius:4px; padding:0 5px; border:1px solid var(--line); background:#fbfcfd; cursor:help; }
.fid.critical { border-color:var(--critical); color:#a34400; } .fid.warning { border-color:var(--warning); color:#7a5300; }
.scroll { overflow-x:auto; }
"""
