"""What bench's `work` part times, inside the jail and outside: run by /usr/bin/python3 as
`workload.py files WHERE N` or `workload.py git REPO`; prints {"inner": seconds}."""

import json
import os
import subprocess
import sys
import time

what, where = sys.argv[1], sys.argv[2]
dt = 0.0
if what == "files":
    n = int(sys.argv[3])
    d = os.path.join(where, f"files-{os.getpid()}")
    t0 = time.perf_counter()
    os.mkdir(d)
    names = [os.path.join(d, f"f{i:05d}") for i in range(n)]
    for p in names:
        with open(p, "wb") as f:
            f.write(b"x")
    for p in names:
        os.stat(p)
    for p in names:
        os.unlink(p)
    os.rmdir(d)
    dt = time.perf_counter() - t0
elif what == "git":
    t0 = time.perf_counter()
    subprocess.run(["git", "-C", where, "status"], check=True, stdout=subprocess.DEVNULL)
    dt = time.perf_counter() - t0
print(json.dumps({"inner": dt}))
