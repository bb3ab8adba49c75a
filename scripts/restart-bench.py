#!/usr/bin/env python3
"""Times ocm-hub restarts over a sled store of N ConfigMap writes (BENCHMARKS.md): from spawning
the hub until /readyz answers 200, three restarts. The watch cache reads the store back at start,
the last 10,000 revisions replayed, so this is what that reading costs.

Usage: scripts/restart-bench.py target/release/ocm-hub 20000
"""
import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
import time

import requests

hub, n = sys.argv[1], int(sys.argv[2])
d = tempfile.mkdtemp()
def start():
    p = subprocess.Popen([hub, "serve", "--data-dir", d, "--listen", "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t0 = time.time()
    ep = os.path.join(d, "endpoints.json")
    while True:
        try:
            url = json.load(open(ep))["https"]
            r = requests.get(url + "/readyz", verify=os.path.join(d, "pki/ca.crt"), timeout=1)
            if r.status_code == 200:
                return p, url, time.time() - t0
        except Exception:
            pass
        time.sleep(0.02)
p, url, _ = start()
cert = (os.path.join(d, "pki/admin.crt"), os.path.join(d, "pki/admin.key"))
s = requests.Session(); s.trust_env = False; s.cert = cert; s.verify = os.path.join(d, "pki/ca.crt")
def post(i):
    body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": f"cm-{i}"}, "data": {"k": "v" * 200}}
    r = s.post(url + "/api/v1/namespaces/default/configmaps", json=body)
    assert r.status_code == 201, r.text
with concurrent.futures.ThreadPoolExecutor(16) as ex:
    list(ex.map(post, range(n)))
rv = s.get(url + "/api/v1/namespaces/default/configmaps?limit=1").json()["metadata"]["resourceVersion"]
times = []
for _ in range(3):
    os.remove(os.path.join(d, "endpoints.json"))
    p.terminate(); p.wait()
    p, url, t = start()
    times.append(t)
p.terminate(); p.wait()
print(f"writes {n} store revision {rv} restart-to-ready s: {' '.join(f'{t:.2f}' for t in times)}")
