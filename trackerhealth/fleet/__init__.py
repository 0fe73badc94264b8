"""Fleet scans: many projects in one scan, and Ray as the engine that spreads runs over a cluster.

* :mod:`.targets` — which projects a scan covers (repeated ``--project``/``--experiment``,
  ``--entity``, ``--all-experiments``);
* :mod:`.ray_connect` — joining a Ray cluster (or starting one here: ``--ray local``);
* :mod:`.ray_engine` — each run's fetch → analyse → write as a Ray task;
* :mod:`.credentials` — how keys reach workers without appearing in task arguments or logs;
* :mod:`.lake` — a folder of Parquet histories, grouped by run with Ray Data.

Ray is an optional extra (``pip install 'trackerhealth[ray]'``): nothing here imports it at
module level, and the core never imports this package.
"""
