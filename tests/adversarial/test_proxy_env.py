"""The host's proxy variables, seen from inside a proxied jail (issue 15, policy side)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.adversarial

HOST_PROXY = {"HTTPS_PROXY": "http://host-proxy.invalid:3128", "https_proxy": "http://host-proxy.invalid:3128",
              "HTTP_PROXY": "http://host-proxy.invalid:3128", "NO_PROXY": "host-proxy-bypass.invalid"}


@pytest.mark.parametrize("network", ["host", "proxy"])
def test_a_proxied_jail_never_sees_the_hosts_proxy_variables(jail_env, network):
    """The host's HTTPS_PROXY/NO_PROXY (the Codex profile passes them under host and none) would
    send the CLI past the session's proxy, or exempt names from it. The jailed CLI reports what
    it sees: under proxy the host's values are absent (the session's own may be there); under host
    they arrive (the control)."""
    env = jail_env
    if network == "host":  # the control: verified's default and widest is proxy, the operator allows host
        env.config_dir.mkdir(parents=True, exist_ok=True)
        (env.config_dir / "config.toml").write_text('[network]\nverified = "host"\n')
    env.run("approve", "codex", "--yes", check=True)
    proc = env.run("start", "codex", "--mode", "verified", "--workspace", str(env.ws), "--name", "v",
                   "--detach", "--non-interactive", "--network", network, env_extra=HOST_PROXY)
    assert proc.returncode == 0, proc.stderr
    seen = {k: v for k, v in env.report("codex", timeout=30).items() if k.startswith("env-")}
    leaked = {k: v for k, v in seen.items() if "host-proxy" in str(v)}
    if network == "host":
        assert {"env-HTTPS_PROXY", "env-NO_PROXY"} <= set(leaked), seen
    else:
        assert leaked == {}, seen
