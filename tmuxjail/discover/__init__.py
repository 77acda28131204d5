"""Discovery (issue #16): run a provider once in an audit jail with tracing from outside it, turn
what it touched into evidence, classify the evidence against the capability catalogue and the
shipped profile, and write a candidate profile that only a human's approval can make effective.

    trace      the strace argv and a strict parser of its output (pure)
    evidence   the versioned evidence schema, built from a parsed trace (pure)
    classify   evidence + profile + catalogue -> baseline, overlay, raw (pure)
    candidate  the candidate profile TOML: write, load, diff against the shipped one

The run itself (discover, show, replay, approve --candidate) starts and stops sessions, so it is a
command: commands/discovery.py, with its handlers in commands/discover.py. This package is core.
"""
