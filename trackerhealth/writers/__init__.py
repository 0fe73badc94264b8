"""Writers: put each run's health back where the team looks (tags, summary keys, the dashboard,
alerts) and render the report formats.

Tracker writers subclass :class:`trackerhealth.writers.base.Writer` and return a frozen
:class:`~trackerhealth.writers.base.WriteOutcome`; alert channels subclass
:class:`~trackerhealth.writers.base.AlertSink`. A writer gets what it needs from an adapter (an
open client, a retry policy) from :mod:`trackerhealth.trackers`, through the adapter's public
members only.
"""
