"""``python -m agentreel.llm_proxy record|replay ...`` (see ``agentreel.llm_proxy.main``)."""

import sys

from agentreel.llm_proxy._cli import main

sys.exit(main())
