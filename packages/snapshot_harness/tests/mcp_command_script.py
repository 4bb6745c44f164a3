"""A command scenario's script (``protocol = "command"``) with an MCP client: the model
(through the proxy) picks the numbers, the ``calc`` server (reached by the command line the
harness put in ``$CALC_CMD`` and in ``~/calc.conf`` for ``{mcp:calc}``) adds them."""

import asyncio
import os
import shlex
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from openai import OpenAI


async def add(argv: list[str], a: int, b: int) -> str:
    server = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with stdio_client(server) as (read, write), ClientSession(read, write) as client:
        await client.initialize()
        result = await client.call_tool("add", {"a": a, "b": b})
        return str(result.content[0].text)  # type: ignore[union-attr]


def main() -> None:
    configured = (Path.home() / "calc.conf").read_text().strip()
    if configured != os.environ["CALC_CMD"]:
        sys.exit(f"~/calc.conf {configured!r} differs from $CALC_CMD {os.environ['CALC_CMD']!r}")
    with OpenAI(max_retries=0) as client:
        reply = client.chat.completions.create(
            model="stub-model", messages=[{"role": "user", "content": sys.argv[1]}]
        )
    a, b = (int(n) for n in (reply.choices[0].message.content or "").split())
    print(f"sum: {asyncio.run(add(shlex.split(configured), a, b))}")


if __name__ == "__main__":
    main()
