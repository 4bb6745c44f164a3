"""``python -m agentreel.snapshot_harness replay|record|refresh ...``: the ``agentreel`` CLI."""

from agentreel.snapshot_harness._cli import main

raise SystemExit(main())
