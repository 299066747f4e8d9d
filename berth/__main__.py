"""``python -m berth``: the same as the ``berth`` command (for a venv not on PATH, or ``sudo``)."""

from berth.cli.main import main

raise SystemExit(main())
