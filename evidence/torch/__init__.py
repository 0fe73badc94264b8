"""A corpus of real torch trainings on data that installed packages ship, with twin-run ground truth.

``python -m evidence.torch.generate`` regenerates it (seeded, CPU, torch==2.13.0); the outputs are
cached under ``runs/`` with one manifest fragment per family under ``manifest/``, so nothing trains
in CI. See README.md in this folder.
"""
