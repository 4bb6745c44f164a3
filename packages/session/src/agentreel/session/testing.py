"""Fake credentials for tests of the secret scan (``SecretScan``).

Each has the shape of a real key of its kind and is made at run time from a seeded random
generator, so no committed file holds a real-looking key, and no test output needs to
print one (tests name the kind, never the value). They unlock nothing.
"""

from __future__ import annotations

import random
import string

__all__ = ["FAKE_CREDENTIAL_RULES", "fake_credentials"]

FAKE_CREDENTIAL_RULES = {
    "openai": "OpenAI Token",
    "openai-project": "OpenAI Token",
    "anthropic": "Anthropic API Key",
    "aws": "AWS Access Key",
    "github": "GitHub Token",
    "github-fine-grained": "GitHub Token",
    "private-key": "Private Key",
    "google": "Google API Key",
}
"""Each fake credential's kind → the scan's rule that names it."""

_ALNUM = string.ascii_letters + string.digits


def fake_credentials(seed: int = 29) -> dict[str, str]:
    """One fake key per kind of ``FAKE_CREDENTIAL_RULES``, the same for the same seed."""
    rng = random.Random(seed)

    def chars(count: int, alphabet: str = _ALNUM) -> str:
        return "".join(rng.choice(alphabet) for _ in range(count))

    body = "\n".join(chars(64, _ALNUM + "+/") for _ in range(3))
    return {
        "openai": "sk-" + chars(20) + "T3Blbk" + "FJ" + chars(20),
        "openai-project": "sk-" + "proj-" + chars(74) + "T3Blbk" + "FJ" + chars(74),
        "anthropic": "sk-" + "ant-api03-" + chars(93, _ALNUM + "_-") + "AA",
        "aws": "AK" + "IA" + chars(16, string.ascii_uppercase + "234567"),
        "github": "gh" + "p_" + chars(36),
        "github-fine-grained": "github"
        + "_pat_11"
        + chars(22, string.ascii_uppercase + string.digits)
        + "_"
        + chars(59),
        "private-key": "-----BEGIN RSA PRIVATE"
        + " KEY-----\n"
        + body
        + "\n-----END RSA PRIVATE KEY-----",
        "google": "AI" + "za" + chars(35, _ALNUM + "_-"),
    }
