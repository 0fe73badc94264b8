"""Adapters: read runs from trackers and files into the common schema."""
