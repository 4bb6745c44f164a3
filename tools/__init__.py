"""Repository tooling that is not a package of its own; run from the root as
``python -m tools.<name>``."""
