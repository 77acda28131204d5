"""The MCP stub inside the jail (issue 31, DESIGN §10). Stdlib only.

The CLI's MCP configuration names `python3 -I -S -c CODE NAME` as a stdio server. The stub
connects to the session's broker socket (bound into this jail only), sends one header line naming
the server, then relays bytes both ways without reading them: the broker parses and checks
every message outside the jail. The header goes from the thread that relays stdin, so a refusal
that closes the socket before the header is sent is still read and relayed. stdin's EOF
half-closes the socket, so the server's last answers still arrive; the socket's EOF ends the stub."""

from __future__ import annotations

SOCKET = "/run/tmuxjail/mcp/broker.sock"
CONFIG = "/run/tmuxjail/mcp/config.json"  # the CLI's MCP configuration, bound read-only

CODE = f"""import os,sys,socket,json,threading
s=socket.socket(socket.AF_UNIX)
try:s.connect(sys.argv[2] if len(sys.argv)>2 else {SOCKET!r})
except OSError as e:sys.stderr.write("tmuxjail mcp stub: cannot reach the session's broker: %s\\n"%e);sys.exit(1)
def up():
 try:
  s.sendall(json.dumps({{"server":sys.argv[1]}}).encode()+b"\\n")
  while b:=os.read(0,65536):s.sendall(b)
  s.shutdown(socket.SHUT_WR)
 except OSError:pass
try:
 threading.Thread(target=up,daemon=True).start()
 while b:=s.recv(65536):
  while b:b=b[os.write(1,b):]
except OSError:pass"""  # (no newline at the end: Claude Code warns of whitespace around an argument)


def argv(python: str, name: str) -> list[str]:
    """The stub's command line for the MCP server `name` (what the CLI's MCP config runs)."""
    return [python, "-I", "-S", "-c", CODE, name]


def command(python: str, server: dict) -> list[str]:
    """What the CLI's MCP configuration runs for an attached server (a policy's `mcp` entry): the
    stub to the broker, or a server that runs in the jail (run = "jail") itself."""
    if server.get("run", "host") == "jail":
        return [server["command"], *server.get("args", ())]
    return argv(python, server["name"])
