"""agentreel.snapshot_harness (in progress)."""
