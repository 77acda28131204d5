"""What the MCP tests share (tests/integration/test_broker.py, tests/adversarial/test_mcp.py): a
real MCP server written with the `mcp` SDK. Its `whoami` answers the sha256 of the SECRET it was
given, so a test sees that the secret arrived without putting it where a jail could read it."""

from __future__ import annotations

import textwrap

SERVER = textwrap.dedent("""
    import hashlib, os
    from mcp.server.mcpserver import MCPServer

    app = MCPServer("test")

    @app.tool()
    def echo(text: str) -> str:
        return text

    @app.tool()
    def add(a: int, b: int) -> int:
        return a + b

    @app.tool()
    def secret_tool() -> str:
        return "the hidden tool ran"

    @app.tool()
    def whoami() -> str:
        return hashlib.sha256(os.environ.get("SECRET", "").encode()).hexdigest()

    @app.resource("res://secret")
    def secret_resource() -> str:
        return "the hidden resource"

    @app.prompt()
    def secret_prompt() -> str:
        return "the hidden prompt"

    app.run()
""")
