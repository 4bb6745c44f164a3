"""``python -m agentreel.acp_agent``: the same as the ``agentreel-acp-agent`` command."""

import sys

from agentreel.acp_agent._main import main

if __name__ == "__main__":
    sys.exit(main())
