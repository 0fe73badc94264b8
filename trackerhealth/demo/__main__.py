"""``python -m trackerhealth.demo`` is ``trackerhealth demo``."""

from ._cli import demo

if __name__ == "__main__":  # pragma: no cover - exercised through a subprocess in tests/demo
    demo(prog_name="trackerhealth demo")
