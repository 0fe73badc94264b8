"""A real two-node Ray cluster on 127.0.0.1 for the tests: ``ray start --head`` and a second
``ray start --address``, each its own processes, stopped (only these, never another cluster on
the machine) at the end of the session."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RayCluster:
    address: str  # HOST:PORT of the head's GCS
    temp_dir: Path  # the cluster's session folders and logs
    port: int
    env: dict[str, str]

    def processes(self):
        """Every process of this cluster: those naming its folder or port, and their descendants."""
        import psutil

        marks = (str(self.temp_dir), f":{self.port}")
        roots = []
        for proc in psutil.process_iter(["cmdline"]):
            cmd = " ".join(proc.info["cmdline"] or [])
            if any(m in cmd for m in marks):
                roots.append(proc)
        found = {p.pid: p for p in roots}
        for proc in roots:
            try:
                found.update({c.pid: c for c in proc.children(recursive=True)})
            except psutil.NoSuchProcess:
                pass
        return list(found.values())

    def workers(self, name: str):
        """Worker processes of this cluster now running the Ray function ``name`` (Ray titles a
        busy worker ``ray::<function>``)."""
        out = []
        for proc in self.processes():
            try:
                if proc.name().startswith(f"ray::{name}") or " ".join(proc.cmdline()).startswith(f"ray::{name}"):
                    out.append(proc)
            except Exception:  # noqa: BLE001 - a process that ended while we looked
                pass
        return out

    def stop(self) -> None:
        import psutil

        procs = self.processes()
        for proc in procs:
            try:
                proc.kill()
            except psutil.NoSuchProcess:
                pass
        psutil.wait_procs(procs, timeout=10)
        shutil.rmtree(self.temp_dir, ignore_errors=True)


def start_cluster(port: int, cpus_per_node: int = 2) -> RayCluster:
    ray_bin = Path(os.sys.executable).with_name("ray")
    # Short: Ray's socket paths live under it and a Unix socket path has ~107 characters.
    temp_dir = Path(tempfile.mkdtemp(prefix="rth-", dir="/tmp"))
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0"}
    common = ["--node-ip-address", "127.0.0.1", "--num-cpus", str(cpus_per_node), "--disable-usage-stats"]
    cluster = RayCluster(f"127.0.0.1:{port}", temp_dir, port, env)
    try:
        subprocess.run([str(ray_bin), "start", "--head", "--port", str(port), "--include-dashboard", "false",
                        "--temp-dir", str(temp_dir), *common], env=env, check=True, capture_output=True, timeout=120)
        subprocess.run([str(ray_bin), "start", "--address", cluster.address, *common], env=env, check=True,
                       capture_output=True, timeout=120)
    except subprocess.CalledProcessError as exc:
        cluster.stop()
        raise RuntimeError(f"ray start failed: {exc.stderr.decode(errors='replace')[-2000:]}") from None
    # `ray start --address` returns once its raylet has registered with the head: both nodes are up.
    return cluster

