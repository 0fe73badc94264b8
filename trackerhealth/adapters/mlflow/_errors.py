"""Errors the MLflow adapter raises; each message says what to do about it."""

from __future__ import annotations

from ..base import RunSkipped, SelectionError, TrackerUnreachable

__all__ = ["ApiError", "MalformedAnswer", "MlflowMissing", "RunSkipped", "SelectionError", "TrackerUnreachable", "import_mlflow"]

INSTALL_HINT = "pip install 'trackerhealth[mlflow]'"


class MlflowMissing(ImportError):
    """mlflow (or requests) is not installed; the message says how to install the extra."""


class ApiError(Exception):
    """The tracking server answered, with an error (after retries, for transient ones)."""

    def __init__(self, status: int, error_code: str, message: str, what: str = ""):
        self.status = status
        self.error_code = error_code
        self.message = message
        text = f"{error_code or 'HTTP ' + str(status)}: {message}"
        super().__init__(f"{what}: {text}" if what else text)

    @property
    def not_found(self) -> bool:
        return self.error_code == "RESOURCE_DOES_NOT_EXIST" or self.status == 404


class MalformedAnswer(TrackerUnreachable):
    """The server answered, but not with what MLflow's API answers: a broken server or proxy (exit 3)."""

    def __init__(self, detail: str):
        super().__init__(f"the MLflow server answered malformed JSON: {detail}; check --mlflow-uri, and the server "
                         "or proxy in front of it")


def import_mlflow():
    """Import mlflow lazily: the analysis core and ``analyze`` never need it."""
    try:
        import mlflow
        from mlflow.tracking import MlflowClient  # noqa: F401
    except ImportError as exc:
        raise MlflowMissing(f"scanning MLflow needs the mlflow package ({exc}); install it with: {INSTALL_HINT}") from None
    return mlflow


def import_requests():
    try:
        import requests
    except ImportError as exc:
        raise MlflowMissing(f"scanning an MLflow server needs requests ({exc}); install it with: {INSTALL_HINT}") from None
    return requests
