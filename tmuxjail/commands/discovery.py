"""Discovery use cases: start an observed run, finish it into evidence and a candidate, show it,
replay the candidate under verified mode, approve a candidate on a terminal.

Everything here is written by tmuxjail, outside the jail, into its own state and config
directories, which every strict jail has hidden: the CLI under observation can write neither the
trace, nor the evidence, nor the candidate."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

from .. import approvals, identity, plan, profiles
from .. import config as config_mod
from ..adapters import get as get_adapter
from ..context import server_of
from ..discover import candidate as cand_mod
from ..discover import evidence as ev_mod
from ..discover import trace as trace_mod
from ..discover.classify import classify
from ..discover.evidence import Evidence
from ..errors import NotApproved, SandboxUnavailable, TmuxjailError, UsageError
from ..net import log as netlog
from ..net import record as netrecord
from ..pane.strace import CAP_FILE, STRACE
from ..paths import ensure_private_dir
from ..policy import BASE_ENV, never_passed
from ..registry import Mode
from ..request import StartRequest
from ..sessions.start import start as start_session
from ..sessions.stop import stop as stop_session
from ..subpath import inside

TIMEOUT = 600.0


def root(paths) -> Path:
    return paths.state_dir / "discover"


def _dir(ctx, did: str) -> Path:
    return root(ctx.paths) / cand_mod.check_id(did)


def _write_new(path: Path, data: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(data)


def _read_json(path: Path) -> dict:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return json.loads(f.read(64 << 20))


def meta(ctx, did: str) -> dict:
    try:
        return _read_json(_dir(ctx, did) / "meta.json")
    except (OSError, ValueError):
        raise UsageError(f"no discovery {did!r}", hint="see: tmuxjail discover list") from None


def _new_id(ctx, provider: str, workspace: str, replay_of: str | None = None) -> tuple[str, Path]:

    base = re.sub(r"[^a-z0-9-]+", "-", os.path.basename(workspace).lower()).strip("-")[:30] or "ws"
    prefix = f"{replay_of}-replay" if replay_of else f"{provider}-{base}-"
    top = ensure_private_dir(root(ctx.paths))
    taken = ctx.store.names(include_stopped=True)
    n = 1
    while True:
        did = f"{prefix}{n}"
        if did not in taken:
            try:
                os.mkdir(top / did, 0o700)
                return did, top / did
            except FileExistsError:
                pass
        n += 1


def _env_names(ctx, pol: dict) -> list[str]:

    if pol["env_inherit"]:
        names = {k for k in ctx.env if not never_passed(k)}
    else:
        names = {k for k in pol["env_names"] if k in ctx.env}
    return sorted(names | {k for k, _ in pol["env_set"]})


def start(ctx, provider: str, workspaces: tuple[str, ...], args: list[str], non_interactive: bool,
          timeout: float | None, env_name: str = "default", replay_of: str | None = None) -> dict:
    """Start the observed run: isolated mode (its layout and every guard) for a discovery, verified
    mode with the approved candidate for a replay; strace from outside the jail either way."""

    if not os.access(STRACE, os.X_OK):
        raise SandboxUnavailable(f"discovery traces the jail from outside with strace, and {STRACE} is missing",
                                 hint="sudo apt-get install -y strace   (then: tmuxjail doctor)")
    mode = Mode.verified if replay_of else Mode.isolated
    opts = StartRequest.build(ctx.env.get("PWD") or os.getcwd(), provider, mode=mode, workspaces=workspaces,
                              env_name=env_name, detach=True, non_interactive=True, args=tuple(args),
                              candidate=replay_of)
    ws = opts.workspaces
    did, d = _new_id(ctx, provider, ws[0], replay_of)
    try:  # read by the launcher, which stops the run there (pane/strace.py, pane/tracecap.py)
        _write_new(d / CAP_FILE, str(config_mod.load(ctx.paths.config_file).trace_cap))
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    try:
        result = start_session(ctx, opts._replace(name=did, trace=str(d / "trace")))
    except BaseException:
        shutil.rmtree(d, ignore_errors=True)
        raise
    row = ctx.store.find(did)
    pol = row.policy_data
    profile = plan.profile_for(ctx, provider, replay_of)
    m = {
        "id": did, "provider": provider, "mode": mode, "workspaces": list(ws), "args": list(args),
        "non_interactive": non_interactive, "timeout": timeout, "env_name": env_name, "session": did,
        "session_id": row.id, "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "home": pol["home"], "private_home": pol["private_home"],
        "own_dirs": [str(x) for x in ctx.paths.own_dirs()], "install_roots": list(pol["install_roots"]),
        "identity": pol["executable"], "env_provided": _env_names(ctx, pol),
        "env_declared": sorted({e for c in pol["capabilities"] for e in profile.capabilities[c].env}
                               | set(BASE_ENV) | {k for k, _ in pol["env_set"]}),
        "replay_of": replay_of, "tmux_pane": result.get("tmux_pane"),
    }
    _write_new(d / "meta.json", json.dumps(m, indent=2, sort_keys=True))
    return m


# -- waiting -------------------------------------------------------------------------------------

def trace_done(path: Path) -> bool:
    """True once the trace holds the exit of its first process (bubblewrap, the jail itself)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return False
    with os.fdopen(fd, "rb") as f:
        first = f.readline(256)
        m = re.match(rb"(\d+) ", first)
        if not m:
            return False
        size = os.fstat(f.fileno()).st_size
        f.seek(max(0, size - 8192))
        tail = f.read()
    if re.search(rb"(?m)^" + trace_mod.CAP_MARK.encode() + rb"\d+$", tail):
        return True  # stopped at the trace's size cap
    return re.search(rb"(?m)^" + m.group(1) + rb" +\S+ \+\+\+ (exited with|killed by) ", tail) is not None


def _session_live(ctx, m: dict) -> bool:

    row = ctx.store.find(m["session"])
    if row is None or row.status in ("stopped", "failed"):
        return False
    try:
        return server_of(ctx, row).has_session(m["session"])
    except TmuxjailError:
        return False


def wait(ctx, m: dict, timeout: float) -> bool:
    """Wait for the run to end; False when it timed out."""
    trace = _dir(ctx, m["id"]) / "trace"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if trace_done(trace) or not _session_live(ctx, m):
            return True
        time.sleep(0.1)
    return False


def attach_and_wait(ctx, m: dict) -> bool:
    """Interactive: attach the user's terminal to the observed pane; when the CLI exits, end the
    session (the attach ends with it). False when the user detached while the CLI still runs."""
    argv = ctx.tmux.attach_argv(m["session"])
    client = subprocess.Popen(argv)
    trace = _dir(ctx, m["id"]) / "trace"
    try:
        while client.poll() is None:
            if trace_done(trace):
                _stop(ctx, m)
                client.wait(timeout=10)
                return True
            time.sleep(0.2)
    finally:
        if client.poll() is None:
            client.terminate()
    return trace_done(trace) or not _session_live(ctx, m)


def _stop(ctx, m: dict) -> None:

    row = ctx.store.find(m["session"])
    if row is not None and row.status != "stopped":
        try:
            stop_session(ctx, m["session"])
        except TmuxjailError:
            pass


# -- evidence and candidate ----------------------------------------------------------------------

def _proxy_log(ctx, m: dict) -> list[dict] | None:
    """The session's egress-proxy log (issue 15: state/net/<session id>/network.jsonl, one JSON
    object per decision; issue 27.3: its older generation network.jsonl.1 first, and each
    destination of the proxies' counters the rows no longer hold, so a flood before a probe cannot
    hide it), where that has landed; None when there is none (the evidence then says "not
    observed by a proxy"). Host names in it came from the jail: only printable ASCII is kept."""
    sid = "".join(c for c in m["session_id"] if c.isalnum() or c in "-_")[:64] or "session"
    directory = ctx.paths.state_dir / "net" / sid
    path = directory / "network.jsonl"
    if not path.exists() and not netrecord.counter_files(str(directory)):
        return None
    out = []
    for p in (str(path) + netrecord.OLD_SUFFIX, str(path)):
        for raw in netrecord.read_file(p, 16 << 20).splitlines()[:10000]:
            try:
                r = json.loads(raw)
            except ValueError:
                continue
            if isinstance(r, dict) and r.get("decision") not in (*netrecord.AGGREGATES, *netrecord.MARKERS):
                out.append({k: "".join(c if 32 <= ord(c) < 127 else "?" for c in str(r.get(k)))[:300]
                            for k in ("host", "port", "decision")})
    seen = {r["host"] for r in out}
    for host, d in netlog.counters(str(directory))["destinations"].items():
        if host not in seen:
            out += [{"host": host, "port": str(port), "decision": "allowed" if d["allowed"] else "denied"}
                    for port in d["ports"] or [0]]
    return out


def _host_has(path: str) -> bool:
    try:
        os.lstat(path)  # existence only: never followed at the end, never opened, never read
        return True
    except (OSError, ValueError):
        return False


def finish(ctx, did: str, timed_out: bool = False) -> dict:
    """Turn a finished (or stopped) run into evidence.json and, for a discovery, a candidate.
    Idempotent: the first finish writes, later ones read."""

    m = meta(ctx, did)
    d = _dir(ctx, did)
    if (d / "evidence.json").exists():
        return _read_json(d / "evidence.json")
    _stop(ctx, m)
    ev = evidence_of(m, d / "trace", _proxy_log(ctx, m), timed_out)
    data = ev.dump()
    _write_new(d / "evidence.json", json.dumps(data, indent=2, sort_keys=True))
    _compress(d / "trace")
    if not m.get("replay_of"):
        write_candidate(ctx, m, ev)
    return data


def evidence_of(m: dict, trace: Path, proxy_log: list[dict] | None, timed_out: bool = False,
                host_has=_host_has) -> Evidence:
    """The evidence of a trace file, read as a stream twice: memory grows with the processes and
    the distinct paths the run used, not with the trace's length (bench/trace_memory.py)."""
    try:
        fd = os.open(trace, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        raise TmuxjailError(f"discovery {m['id']} has no trace (the jail did not start)") from None
    with os.fdopen(fd, "rb") as f:
        h = hashlib.sha256()
        first = [h]  # the first pass hashes the file
        return ev_mod.build_stream(m, lambda: _lines(f, first.pop() if first else None),
                                   lambda: "sha256:" + h.hexdigest(), host_has, proxy_log, timed_out)


def _lines(f, h) -> Iterator[str]:
    """The trace's lines from its start, read a bounded piece at a time: the evidence is built in
    two passes over the file (evidence.build_stream), never from the whole of it in memory. h (or
    None): a hash fed every byte. A line longer than the parser accepts is passed on cut (still too
    long: rejected and counted, as it was whole)."""
    f.seek(0)
    hashing = h is not None
    limit = trace_mod.MAX_LINE + 2
    while raw := f.readline(limit):
        if hashing:
            h.update(raw)
        if len(raw) == limit and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)):
                if hashing:
                    h.update(rest)
                if rest.endswith(b"\n"):
                    break
        yield raw.decode("ascii", "replace")


def _compress(trace: Path) -> None:
    """Once the evidence is built the trace is kept gzipped (trace.gz; its sha256 in the evidence
    is of the plain text), a small fraction of its size, and the plain file removed."""
    import gzip

    gz = trace.with_name("trace.gz")
    fd = os.open(gz, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with os.fdopen(fd, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=1) as out:
        src = os.open(trace, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        with os.fdopen(src, "rb") as f:
            shutil.copyfileobj(f, out, 1 << 20)
    os.unlink(trace)


def _classify(ctx, m: dict, ev, candidate: str | None = None):

    profile = plan.profile_for(ctx, m["provider"], candidate)
    return classify(ev, profile, profiles.shared_capabilities()), profile


def write_candidate(ctx, m: dict, ev) -> Path:

    cls, shipped = _classify(ctx, m, ev)
    digest = hashlib.sha256((_dir(ctx, m["id"]) / "evidence.json").read_bytes()).hexdigest()
    ref = f"evidence {_dir(ctx, m['id']) / 'evidence.json'} sha256:{digest}"
    text = cand_mod.render(m["id"], shipped, profiles.shared_capabilities(), cls, ref)
    profiles.parse_profile(f"candidate {m['id']}", text.encode(), profiles.shared_capabilities(),
                           inline_record=True)  # loads back
    return cand_mod.write(ctx.paths.config_dir, m["id"], text)


def _evidence(ctx, did: str):

    m = meta(ctx, did)
    d = _dir(ctx, did)
    if not (d / "evidence.json").exists():
        if not (trace_done(d / "trace") or not _session_live(ctx, m)):
            raise UsageError(f"discovery {did} is still running",
                             hint=f"end the CLI in its pane (tmux session {m['session']}), then rerun this")
        finish(ctx, did)
    return m, Evidence.load(_read_json(d / "evidence.json"))


def _approved(ctx, provider: str, did: str):

    try:
        p = plan.profile_for(ctx, provider, did)
    except UsageError:
        return None
    return next((a for a in ctx.readonly_store().approvals(provider) if a["profile_hash"] == p.hash), None)


def show(ctx, did: str) -> dict:

    m, ev = _evidence(ctx, did)
    cls, profile = _classify(ctx, m, ev, m.get("replay_of"))
    caps = {**profiles.shared_capabilities(), **profile.capabilities}
    out = {"id": did, "evidence": ev.dump(), "evidence_file": str(_dir(ctx, did) / "evidence.json"),
           "classification": {
               "baseline": cls.baseline, "dropped": cls.dropped,
               "overlay": {c: [u.path for u in uses] for c, uses in cls.overlay.items()},
               "raw": [u.path for u in cls.raw], "never": [u.path for u in cls.never], "folded": cls.folded},
           "labels": {c: caps[c].label for c in [*cls.baseline, *cls.dropped, *cls.overlay] if c in caps}}
    if m.get("replay_of"):
        out["replay_of"] = m["replay_of"]
        out["proposed_changes"] = proposals(cls, caps)
    else:
        out["candidate"] = str(cand_mod.directory(ctx.paths.config_dir) / f"{did}.toml")
        a = _approved(ctx, m["provider"], did)
        out["approved"] = a["id"] if a else None
    return out


def proposals(cls, caps: dict) -> list[dict]:
    """What a replay still found denied, as changes a human may choose to make."""
    out = [{"change": "add-capability", "capability": c, "label": caps[c].label if c in caps else c,
            "paths": [u.path for u in uses]} for c, uses in cls.overlay.items()]
    out += [{"change": "review-raw-path", "path": u.path, "tried": u.tried, "lines": u.lines,
             "note": "no capability covers it; grant it only by writing a capability by hand"} for u in cls.raw]
    return out


def listing(ctx) -> list[dict]:
    top = root(ctx.paths)
    out = []
    for name in sorted(os.listdir(top)) if top.is_dir() else []:
        try:
            m = meta(ctx, name)
        except (UsageError, TmuxjailError):
            continue
        done = (top / name / "evidence.json").exists()
        out.append({"id": name, "provider": m["provider"], "mode": m["mode"], "workspace": m["workspaces"][0],
                    "started_at": m["started_at"], "replay_of": m.get("replay_of"), "finished": done})
    return out


def replay(ctx, did: str, timeout: float | None) -> dict:
    """The same step, verified mode, with the candidate: needs the candidate approved (a replay
    grants what the candidate lists; discovery never grants itself)."""
    m = meta(ctx, did)
    if m.get("replay_of"):
        raise UsageError(f"{did} is a replay; replay the discovery it came from ({m['replay_of']})")
    _evidence(ctx, did)
    if _approved(ctx, m["provider"], did) is None:
        raise NotApproved(f"replaying {did} runs verified mode with its candidate, which is not approved",
                          hint=f"review and approve on a terminal: tmuxjail approve {m['provider']} --candidate {did}",
                          data={"fix": f"tmuxjail approve {m['provider']} --candidate {did}"})
    return start(ctx, m["provider"], tuple(m["workspaces"]), m["args"], m["non_interactive"],
                 timeout if timeout is not None else m.get("timeout"), m["env_name"], replay_of=did)


# -- rendering -----------------------------------------------------------------------------------

def _tilde(path: str, home: str) -> str:
    return "~" + path[len(home):] if inside(path, home) else path


def render(d: dict) -> str:
    ev = d["evidence"]
    home = ev["home"]
    ident = ev["identity"]
    ex = ev["exit"]
    end = ("timed out" if ex["timed_out"] else f"exit {ex['status']}" if ex["status"] is not None
           else f"killed by {ex['signal']}" if ex["signal"] else "ended without an exit status")
    missing = ev_mod.truncation(ev)
    lines = [f"discovery {d['id']}: {ident['provider']} {ident['version']} ({ident['path']}, {ident['sha256'][:19]}…)",
             *(f"  EVIDENCE INCOMPLETE: {x}" for x in missing),
             f"  {ev['mode']} jail, {end}" + (f" after {ev['duration_s']} s" if ev["duration_s"] is not None else ""),
             f"  processes: {len(ev['processes'])}; executables run: "
             + (", ".join(sorted({x for p in ev["processes"] for x in p["execs"]})) or "none")]
    cls, labels = d["classification"], d["labels"]
    by_cap = {p: c for c, ps in cls["overlay"].items() for p in ps}
    if ev["denials"]:
        lines.append("would-be denials (the jail hid or refused these; the CLI tried them):")
        for u in ev["denials"]:
            what = "/".join(sorted(u["tried"])) or "/".join(u["kinds"])
            if u["path"] in by_cap:
                tag = f"-> {labels.get(by_cap[u['path']], by_cap[u['path']])} ({by_cap[u['path']]})"
            elif u["path"] in cls["never"]:
                tag = "tmuxjail's own files: never granted"
            elif u["path"] in cls["raw"]:
                tag = "RAW: no capability covers it, not granted (trace lines " + ", ".join(map(str, u["lines"])) + ")"
            else:
                tag = "covered by the baseline"
            lines.append(f"  {what:10} {_tilde(u['path'], home)}  {tag}")
    else:
        lines.append("would-be denials: none")
    written = [u for u in ev["paths"] if set(u["kinds"]) - {"read", "exec"}]
    lines.append(f"outside the workspace: {len(ev['paths'])} path(s) used ({len(written)} written, created, "
                 "renamed or deleted); folded: " + (", ".join(f"{k} {v}" for k, v in sorted(cls["folded"].items())) or "none"))
    for u in written[:15]:
        lines.append(f"  {'/'.join(u['kinds']):10} {_tilde(u['path'], home)}  ({u['area']})")
    if ev["workspace_counts"]:
        lines.append("in the workspace: " + ", ".join(f"{k} {v}" for k, v in sorted(ev["workspace_counts"].items())))
    env = ev["env"]
    lines.append(f"environment: {len(env['provided'])} name(s) provided; not declared by the profile: "
                 + (" ".join(env["provided_not_declared"]) or "none"))
    net = ev["network"]
    lines.append(f"network: {net['note']}" + ("" if net["destinations"] else "; none seen"))
    lines += [f"  {x['decision']:9} {x['destination']}  ({x['source']})" for x in net["destinations"][:20]]
    lines.append("baseline: " + (", ".join(cls["baseline"]) or "none")
                 + ("; dropped (never touched): " + ", ".join(cls["dropped"]) if cls["dropped"] else ""))
    if d.get("proposed_changes") is not None:
        lines.append(f"replay of {d['replay_of']} under verified mode; still denied, as proposed changes:")
        for p in d["proposed_changes"] or [{"change": "none"}]:
            if p["change"] == "add-capability":
                lines.append(f"  + add capability {p['capability']}: {p['label']}")
            elif p["change"] == "review-raw-path":
                lines.append(f"  ? {_tilde(p['path'], home)} ({'/'.join(sorted(p['tried']))}): {p['note']}")
            else:
                lines.append("  none: the candidate covers everything the step tried")
    else:
        state = f"approved ({d['approved']})" if d.get("approved") else "NOT approved"
        lines.append(f"candidate: {d['candidate']} ({state})")
        if not d.get("approved"):
            lines.append(f"  review and approve on a terminal: tmuxjail approve {ident['provider']} --candidate {d['id']}")
    return "\n".join(lines)


# -- approve --candidate -------------------------------------------------------------------------

def approve_preview(ctx, provider: str, did: str, details: bool, color: bool) -> dict:

    cand = cand_mod.load(ctx.paths.config_dir, provider, did)
    shipped = profiles.load(provider)
    ident = _identity(ctx, provider, shipped)
    text = cand_mod.describe(shipped, cand, details, color)
    text += approvals.describe(cand, ident, (), False)[1:]
    missing = truncated(ctx, did)
    if missing:
        red, off = ("\x1b[1;31m", "\x1b[0m") if color else ("", "")
        text = [f"{red}WARNING: this candidate comes from INCOMPLETE evidence; it may lack what the CLI did in:{off}",
                *(f"{red}  - {x}{off}" for x in missing), *text]
    return {"provider": provider, "profile_version": cand.profile_version, "profile_hash": cand.hash,
            "truncated": missing,
            "executable": approvals.identity_key(ident), "capabilities": list(cand.baseline),
            "labels": {c: cand.capabilities[c].label for c in cand.baseline}, "text": text,
            "diff": cand_mod.as_json(shipped, cand), "candidate": did}


def truncated(ctx, did: str) -> list[str]:
    """What the discovery's evidence is missing (evidence.truncation), or one line saying it
    cannot be read."""
    try:
        return ev_mod.truncation(_read_json(_dir(ctx, did) / "evidence.json"))
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return [f"the evidence of {did} cannot be read: nothing shows what this candidate is based on"]


def _identity(ctx, provider: str, profile) -> dict:
    """Today's identity of the provider's executable, as an approval pins it (nothing runs)."""

    cfg = config_mod.load(ctx.paths.config_file)
    path_env = ctx.env.get("PATH", os.defpath)
    found = (Path(identity.login_shell()) if provider == "shell"
             else identity.find(profile.executables, path_env, cfg.executables.get(provider), provider))
    return identity.resolve(get_adapter(provider), found, path_env, ctx.store).identity.to_data()


def confirm_on_terminal(question: str) -> bool:
    """Only a human at a terminal: stdin and stdout both a tty, and an explicit yes."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        return False
    try:
        return input(f"{question} [y/N] ").strip().lower() in ("y", "yes")
    except EOFError:
        return False
