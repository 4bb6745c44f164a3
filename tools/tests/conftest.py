"""The repository root on sys.path, so these tests import ``tools`` as the noxfile does."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
