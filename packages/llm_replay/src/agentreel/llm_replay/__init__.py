"""agentreel.llm_replay (in progress)."""
