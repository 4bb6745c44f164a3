import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from agentreel.llm import (
    Finish,
    GenerateOptions,
    Message,
    ProviderNotFoundError,
    available_providers,
    load_provider,
)


def _install_test_distribution(root: Path, provider_name: str, module_name: str) -> None:
    """Lay out a minimal installed distribution that registers one provider."""
    (root / f"{module_name}.py").write_text(
        textwrap.dedent(
            """
            from agentreel.llm import Finish

            LOADED = True

            class EchoProvider:
                def __init__(self, greeting: str = "hi") -> None:
                    self.greeting = greeting

                async def stream(self, options):
                    yield Finish(reason="stop", message=self.greeting)

            def create_provider(**settings):
                return EchoProvider(**settings)
            """
        )
    )
    dist_info = root / f"{module_name}-1.0.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module_name}\nVersion: 1.0\n"
    )
    (dist_info / "entry_points.txt").write_text(
        f"[agentreel.llm.providers]\n{provider_name} = {module_name}:create_provider\n"
    )


@pytest.mark.asyncio
async def test_registry_loads_a_provider_from_a_test_distribution(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_test_distribution(tmp_path, "echo-test", "agentreel_echo_test_provider")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "echo-test" in available_providers()
    assert "agentreel_echo_test_provider" not in sys.modules, "listing must not import"

    provider = load_provider("echo-test", greeting="hello")
    chunks = [
        c async for c in provider.stream(GenerateOptions(model="m", messages=(Message.user("x"),)))
    ]
    assert len(chunks) == 1
    assert isinstance(chunks[0], Finish)
    assert chunks[0].message == "hello"
    monkeypatch.delitem(sys.modules, "agentreel_echo_test_provider")


def test_unknown_provider_lists_the_known_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _install_test_distribution(tmp_path, "echo-test", "agentreel_echo_test_provider2")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ProviderNotFoundError) as excinfo:
        load_provider("no-such-provider")
    message = str(excinfo.value)
    assert "'no-such-provider'" in message
    assert "echo-test" in message
    assert "agentreel.llm.providers" in message


def test_import_agentreel_llm_pulls_in_no_provider_sdk() -> None:
    code = (
        "import sys, agentreel.llm, agentreel.llm.exceptions;"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'httpx', 'httpx2', 'acp', 'pydantic'));"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_the_wire_package_and_its_mappers_pull_in_no_provider_sdk() -> None:
    # The wire layer owns the wire → chunk rules; the SDK adapters import them, never the
    # other way round (a decoder built for record mode imports no SDK either).
    code = (
        "import sys, agentreel.llm.wire, agentreel.llm.wire.mappers;"
        "from agentreel.llm.wire import ChatDecoder, MessagesDecoder, ResponsesDecoder;"
        "ChatDecoder('u'); MessagesDecoder('u'); ResponsesDecoder('u');"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('openai', 'anthropic', 'google', 'httpx', 'httpx2', 'pydantic'));"
        "print(','.join(bad))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == ""


def test_the_wire_mappers_decode_with_no_provider_sdk_importable() -> None:
    # The proxy records through these (agentreel-llm-proxy installs no SDK): with every
    # SDK and its HTTP client refused at import, a Chat Completions and a Messages stream
    # still decode, and nothing of an SDK was imported.
    code = """
import sys
class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split('.')[0] in ('openai', 'anthropic', 'httpx', 'httpx2', 'google'):
            raise ImportError('refused: ' + name)
        return None
sys.meta_path.insert(0, Refuse())
from agentreel.llm.wire import ChatDecoder, MessagesDecoder, SseEvent
from agentreel.llm.wire.mappers import AnthropicStreamMapper, OpenAIStreamMapper
chat = ChatDecoder('http://upstream')
out = chat.event(SseEvent('', '{"choices":[{"index":0,"delta":{"content":"hi"}}]}'))
out += chat.event(SseEvent('', '{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],'
                             '"usage":{"prompt_tokens":3,"completion_tokens":1}}'))
out += chat.finish()
messages = MessagesDecoder('http://upstream')
for data in (
    '{"type":"message_start","message":{"usage":{"input_tokens":4}}}',
    '{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}',
    '{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"yo"}}',
    '{"type":"content_block_stop","index":0}',
    '{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}',
    '{"type":"message_stop"}',
):
    out += messages.event(SseEvent('', data))
out += messages.finish()
print(' '.join(type(c).__name__ + ':' + getattr(c, 'text', '') for c in out))
print(sorted(m for m in sys.modules if m.split('.')[0] in ('openai', 'anthropic', 'httpx2')))
"""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=60
    )
    assert result.returncode == 0, result.stderr
    decoded, imported = result.stdout.splitlines()
    assert decoded.count("TextDelta:") == 2
    assert "TextDelta:hi" in decoded
    assert "TextDelta:yo" in decoded
    assert decoded.count("Finish:") == 2
    assert imported == "[]"
