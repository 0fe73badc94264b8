"""What the action tests share: the install step's name and the runs logged for them."""

from __future__ import annotations

INSTALL = "Check the inputs and install trackerhealth"

# Corpus runs per experiment, with what trackerhealth finds in each (tests/corpus/manifest.json).
MIXED = {
    "healthy_warmup_cosine_hf": "ok",
    "healthy_fast_loader_mlflow": "ok",
    "slow_tiny_lr_sgd_mlp": "warning",
    "nan_exploding_lr_linreg": "critical",
    "bottleneck_mlflow_slow_io": "critical",
}
WARNINGS = {"healthy_step_decay_keras": "ok", "slow_unnormalized_features": "warning"}
# A run whose name is a workflow command: logging it must not make GitHub act on it.
INJECTED_NAME = "::warning title=pwned::injected run name"
