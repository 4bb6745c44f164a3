"""``python -m agentreel.mcp_replay stdio|check ...`` (see ``agentreel.mcp_replay._cli``)."""

import sys

from agentreel.mcp_replay._cli import main

sys.exit(main())
