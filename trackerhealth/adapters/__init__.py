"""Adapters: read runs from trackers and files into the common schema.

Every tracker adapter subclasses :class:`trackerhealth.adapters.base.Adapter` (list runs, fetch a
history; nothing else). Adapters never import writers: :mod:`trackerhealth.trackers` pairs each
adapter with the writer for its runs.
"""
