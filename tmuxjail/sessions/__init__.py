"""The use cases of a jailed session, apart from the command line: start (and preflight, the dry
run), resume, stop, shell, approve. The CLI's handlers (commands/), the API (api.py), the menus
(menu.py) and discovery's run call them with plain arguments and a StartRequest; what may run
again is decided by one function, plan.may_run."""
