"""Joining a Ray cluster for a scan: ``--ray auto``, ``--ray HOST:PORT``, ``--ray ray://HOST:10001``,
or ``--ray local`` to start one on this machine for the length of the command.

The connection is the driver's only: workers are Ray's. A process that is already connected
(a notebook, a test) keeps its connection and this module never shuts it down.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

from ..adapters.base import SelectionError, TrackerUnreachable

__all__ = ["INSTALL_HINT", "LOCAL", "RayMissing", "RaySession", "RayUnreachable", "cluster_events_on_stderr", "connect",
           "import_ray"]

LOCAL = "local"
INSTALL_HINT = "pip install 'trackerhealth[ray]'"


class RayMissing(SelectionError):
    """``--ray`` without Ray installed (a usage error: exit 2)."""


class RayUnreachable(TrackerUnreachable):
    """No Ray cluster answered at the address (exit 3)."""


def import_ray():
    try:
        import ray
    except ImportError as exc:
        raise RayMissing(f"--ray needs Ray ({exc}); install it with: {INSTALL_HINT}") from None
    return ray


@contextlib.contextmanager
def cluster_events_on_stderr() -> Iterator[None]:
    """Send what the Ray driver prints while it is connected to stderr.

    ``log_to_driver=False`` keeps the workers' output away, but the driver's own listener still
    prints cluster events ("(raylet) A worker died or was killed ...", a task Ray then retries) on
    stdout, by design (ray-project/ray#9616). A report on stdout (``--format json > health.json``)
    must be the only thing there, so the command that runs Ray wraps the connection, the work and
    the shutdown in this; the report is printed after, to the real stdout.
    """
    with contextlib.redirect_stdout(sys.stderr):
        yield


@dataclass
class RaySession:
    """A connection this command opened (``owned``: shut it down at the end) or found open."""

    address: str
    owned: bool

    def close(self) -> None:
        if self.owned:
            import ray

            ray.shutdown()
            self.owned = False


def connect(address: str, *, num_cpus: int | None = None) -> RaySession:
    """Connect the driver to ``address`` (or start a local instance for ``local``).

    Ray's own log lines are kept off the command's output (``log_to_driver=False``): worker
    output goes to the cluster's log files, and trackerhealth's report stays the only stdout.
    """
    ray = import_ray()
    if ray.is_initialized():
        return RaySession(address, owned=False)
    address = (address or "").strip()
    if not address:
        raise SelectionError("--ray takes an address: local (start Ray here), auto (the cluster this machine "
                             "belongs to), HOST:PORT or ray://HOST:10001")
    kwargs = {"log_to_driver": False, "configure_logging": True, "logging_level": "ERROR"}
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        if address == LOCAL:
            # address="local": always a new instance here, never a cluster that `ray start` left running.
            ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, **kwargs)
        else:
            host = address.removeprefix("ray://").split(":")[0]
            if host in ("127.0.0.1", "localhost"):
                # A cluster on loopback: this driver must say it is on loopback too, or Ray picks
                # the machine's first address and no node answers there.
                kwargs["_node_ip_address"] = "127.0.0.1"
            ray.init(address=address, **kwargs)
    except ConnectionError as exc:
        raise RayUnreachable(f"no Ray cluster answered at {address} ({str(exc).splitlines()[0][:200]}); start one "
                             "with `ray start --head`, pass its address (HOST:6379, or ray://HOST:10001 for Ray "
                             "Client), or use --ray local") from None
    except (ValueError, RuntimeError) as exc:
        raise RayUnreachable(f"could not join the Ray cluster at {address}: {str(exc).splitlines()[0][:300]}") from None
    return RaySession(address, owned=True)
