"""Every hint resume gives for a changed network is one that works (issue 28.4): each case
changes the config (or the environment) under a stopped proxied session, takes the refusal's
hint, applies it as a user would (the config lines it names, the variable it says to unset), and
resumes. Nothing here sends a packet."""

from __future__ import annotations

import json
import re
import sys
import tomllib

import pytest
from conftest import wait_until

pytestmark = pytest.mark.integration

RESOLVE = '[network.resolve]\n"up.test" = { address = "127.0.0.1", test_upstream = true }\n"far.test" = "203.0.113.9"\n'


def _toml(v) -> str:
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml(x)}" for k, x in v.items()) + " }"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(_toml(x) for x in v) + "]"
    return json.dumps(v)


def _dump(cfg: dict) -> str:
    out, tables = [], []
    for k, v in cfg.items():
        (tables if isinstance(v, dict) else out).append((k, v))
    lines = [f"{json.dumps(k) if '.' in k else k} = {_toml(v)}" for k, v in out]

    def table(prefix, body):
        scalars = [(k, v) for k, v in body.items() if not (isinstance(v, dict) and prefix.startswith("network")
                                                           and k in ("resolve", "allow_domains"))]
        lines.append(f"[{prefix}]")
        lines.extend(f"{json.dumps(k)} = {_toml(v)}" for k, v in scalars)
        for k, v in body.items():
            if (k, v) not in scalars:
                table(f"{prefix}.{k}", v)
    for k, v in tables:
        table(k, v)
    return "\n".join(lines) + "\n"


def apply(env, hint: str, environ: dict) -> None:
    """The hint's "as it was" steps, done: config lines set, tables replaced, variables unset."""
    steps = hint.split("to resume it as it was, ", 1)[1].split("; or ", 1)[0]
    path = env.config_dir / "config.toml"
    cfg = tomllib.loads(path.read_text()) if path.exists() else {}

    def at(table: str) -> dict:
        d = cfg
        for part in table.split("."):
            d = d.setdefault(part, {})
        return d
    done = 0
    for step in steps.split("; and "):
        m = re.search(r"`([^`]+)` under \[([^\]]+)\]", step) or re.search(r"under \[([^\]]+)\] in \S+ set `([^`]+)`", step)
        if m:
            line, table = (m.group(1), m.group(2)) if step.startswith("add") else (m.group(2), m.group(1))
            at(table).update(tomllib.loads(line))
        elif m := re.match(r"replace \[network\.resolve\] in \S+ with: (.*)", step):
            at("network")["resolve"] = tomllib.loads("\n".join(re.findall(r"`([^`]+)`", m.group(1))))
        elif step.startswith("remove [network.resolve]"):
            at("network").pop("resolve", None)
        elif m := re.match(r"(\w+)=\S+ narrows every mode: unset it", step):
            environ.pop(m.group(1))
        else:
            raise AssertionError(f"a step no user could apply: {step!r} (hint: {hint})")
        done += 1
    assert done
    env.config_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(_dump(cfg))


def write(env, text: str) -> None:
    env.config_dir.mkdir(parents=True, exist_ok=True)
    (env.config_dir / "config.toml").write_text(text)


CASES = {
    # name: (config at start, start flags, config after, env after, mode/provider)
    "default network narrowed": ("", (), '[network]\nisolated = "none"\n', {}, "isolated"),
    "allow list narrowed": ("", ("--network", "proxy"), '[network.allow_domains]\nisolated = ["pypi.org"]\n', {},
                            "isolated"),
    "asked domain now outside the list": ("", ("--network", "proxy", "--allow-domain", "pypi.org"),
                                          '[network.allow_domains]\nisolated = ["*.github.com"]\n', {}, "isolated"),
    "allow list widened": ('[network.allow_domains]\nisolated = ["pypi.org", "*.github.com"]\n', (), "", {}, "isolated"),
    "resolve changed": (RESOLVE, (), RESOLVE.replace("203.0.113.9", "203.0.113.10"), {}, "isolated"),
    "resolve removed": (RESOLVE, (), "", {}, "isolated"),
    "TMUXJAIL_NETWORK narrows": ("", (), "", {"TMUXJAIL_NETWORK": "none"}, "isolated"),
    "verified allow list narrowed": ("", (), '[network.allow_domains]\nverified = ["api.openai.com"]\n', {}, "verified"),
    "network and allow list both": ('[network]\nisolated = "proxy"\n[network.allow_domains]\nisolated = ["pypi.org"]\n',
                                    (), '[network]\nisolated = "none"\n[network.allow_domains]\nisolated = ["x.test"]\n',
                                    {}, "isolated"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_every_network_hint_of_resume_works(jail_env, case):
    env = jail_env
    before, flags, after, environ, mode = CASES[case]
    provider = "codex" if mode == "verified" else "shell"
    if mode == "verified":
        env.run("approve", "codex", "--yes", check=True)
    write(env, before)
    env.run("start", provider, "--mode", mode, "--workspace", str(env.ws), "--name", "v", "--detach",
            "--non-interactive", *flags, check=True)
    recorded = env.json("show", "v")["policy"]
    env.kill()
    write(env, after)
    proc = env.run("resume", "v", "--detach", "--json", env_extra=environ)
    assert proc.returncode == 3 and "Traceback" not in proc.stderr, (proc.returncode, proc.stderr)
    assert json.loads(proc.stdout)["reasons"] == ["network"], proc.stdout
    hint = json.loads(proc.stdout)["hint"]
    assert "to resume it as it was, " in hint, hint
    apply(env, hint, environ)
    proc = env.run("resume", "v", "--detach", "--json", env_extra=environ)
    assert proc.returncode == 0, (hint, (env.config_dir / "config.toml").read_text(), proc.stderr)
    assert json.loads(proc.stdout)["status"] in ("running", "starting")
    assert env.json("show", "v")["policy"] == recorded


def test_the_other_way_accept_changes_works_too(jail_env):
    """The hint's alternative, `tmuxjail resume NAME --accept-changes`, asks on a terminal: typed
    into a pane and answered, it moves the session to today's network."""
    env = jail_env
    env.run("start", "shell", "--mode", "isolated", "--workspace", str(env.ws), "--name", "v", "--detach",
            "--non-interactive", check=True)
    env.kill()
    write(env, '[network.allow_domains]\nisolated = ["pypi.org"]\n')
    proc = env.run("resume", "v", "--detach", "--json")
    hint = json.loads(proc.stdout)["hint"]
    cmd = re.search(r"or run it under today's with `([^`]+)`", hint).group(1)
    assert cmd == "tmuxjail resume v --accept-changes", hint
    rc = env.root / "rc"
    words = " ".join([sys.executable, "-P", "-m", "tmuxjail", *env.flags, *cmd.split()[1:], "--detach"])
    env.tmux("new-session", "-d", "-s", "answer", "-c", str(env.ws), f"{words}; echo $? > {rc}; sleep 60")
    wait_until(lambda: "[y/N]" in env.tmux("capture-pane", "-p", "-t", "=answer:"), timeout=60, what="the question")
    env.tmux("send-keys", "-t", "=answer:", "y", "Enter")
    wait_until(rc.exists, timeout=60, what="the resume's exit")
    assert rc.read_text().strip() == "0", env.tmux("capture-pane", "-p", "-t", "=answer:")
    assert env.json("show", "v")["policy"]["allow_domains"] == ["pypi.org"]
