"""What runs in the pane, outside the jail: the launcher (launch, and its steps: helper, spec,
executable, narrow, binds, refuse), the strace argv of a discovery run and its size cap (strace,
tracecap), and the one owner of the pane's command line (command). Stdlib only, plus the named
few of tmuxjail that tests/unit/test_imports.py lists. Empty, so importing one module loads no
other."""
