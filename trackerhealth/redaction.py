"""Secrets out of every message: ``user:password@`` in URLs, bearer tokens, ``token=…`` query values.

One choke point for text that leaves the process (error entries, the table, JSON, logs): MLflow's
client and ``requests`` put the URL they were given — credentials and all — into their exception
text, and a message that quotes such an exception must not carry the password on.
"""

from __future__ import annotations

import logging
import re

__all__ = ["SecretFilter", "install_log_filter", "redact_secrets"]

# scheme://user:password@host  ->  scheme://user:***@host  (and scheme://token@host -> scheme://***@host)
_URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^\s/@:'\"<>]*):(?P<pw>[^\s/@'\"<>]+)@")
_URL_TOKEN = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<tok>[^\s/@:'\"<>]{20,})@")
_BEARER = re.compile(r"(?i)\b(bearer|basic|token)(\s+)[A-Za-z0-9._~+/=-]{8,}")
_QUERY = re.compile(r"(?i)([?&](?:access_token|api_key|apikey|token|password|secret|sig|signature)=)[^&\s'\"]+")


def redact_secrets(text: str) -> str:
    """``text`` with every credential it carries replaced by ``***``."""
    if not text:
        return text
    text = _URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", str(text))
    text = _URL_TOKEN.sub(lambda m: f"{m['scheme']}***@", text)
    text = _BEARER.sub(lambda m: f"{m[1]}{m[2]}***", text)
    return _QUERY.sub(lambda m: f"{m[1]}***", text)


class SecretFilter(logging.Filter):
    """Redacts each log record's text before a handler writes it."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # noqa: BLE001 - a malformed record is logging's problem, not ours
            return True
        cleaned = redact_secrets(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True


_installed = SecretFilter()


def install_log_filter() -> None:
    """Redact the log lines of the libraries a scan drives (mlflow, urllib3, requests, wandb)."""
    for name in ("", "mlflow", "urllib3", "requests", "wandb", "trackerhealth"):
        logger = logging.getLogger(name)
        if _installed not in logger.filters:
            logger.addFilter(_installed)
        for handler in logger.handlers:
            if _installed not in handler.filters:
                handler.addFilter(_installed)
    if logging.lastResort is not None and _installed not in logging.lastResort.filters:
        logging.lastResort.addFilter(_installed)  # what prints a warning when nobody configured logging
