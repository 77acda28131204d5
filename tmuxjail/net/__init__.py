"""The network side of a proxied jail, stdlib only: the policy's domain checks (check, policy), the
egress proxy the launcher's helper becomes (listen, then proxy), the relay inside the jail (bridge),
and the proxy's log and counters (record, read back by log). Empty, so importing one module loads
no other (docs/network.md)."""
