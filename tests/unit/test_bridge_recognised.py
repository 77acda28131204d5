"""A start is ready once the CLI itself runs, past the proxy's bridge: host.jail_exec_started skips
a process whose command line is the bridge's (net.bridge.is_bridge), and only that."""

from __future__ import annotations

from tmuxjail.net import bridge


def test_the_bridges_command_line_is_recognised():
    words = bridge.command("/usr/bin/python3", "/run/tmuxjail/bridge.py", bridge.SOCKET, ["/usr/bin/codex", "--x"])
    assert bridge.is_bridge(words)


def test_a_python_cli_is_not_the_bridge():
    for words in (["/usr/bin/python3", "/opt/cli/main.py", "--port", "3128"],
                  ["/usr/bin/python3", "-I", "-S", "/work/bridge.py"],
                  ["/usr/bin/python3", "-I", "-S", "/run/tmuxjail/bridge.py", "sock", "8080", "--", "x"],
                  ["/usr/bin/python3"]):
        assert not bridge.is_bridge(words)
