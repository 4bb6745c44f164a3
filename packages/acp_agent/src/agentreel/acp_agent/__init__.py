"""agentreel.acp_agent (in progress)."""
