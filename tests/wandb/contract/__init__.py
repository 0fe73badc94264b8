"""A strict W&B GraphQL contract server for the tests (see server.py)."""
