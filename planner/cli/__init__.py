"""`gpuplan`: the command line, one module per command family, assembled in ``app.py``.

The top layer: a command reads its inputs, calls the layers below (operations, outputs, verify,
simulate, planning) and prints; nothing below imports from here.
"""

from planner.cli.app import app, main

__all__ = ["app", "main"]
