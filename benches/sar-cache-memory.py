#!/usr/bin/env python3
"""The SubjectAccessReview cache under large users: sends REVIEWS AdmissionReviews (default 260),
each from a user of its own with GROUPS groups (default 20,000: about 1.1 MB of userInfo), one
at a time over TLS to a webhook whose matchCondition makes one `authorizer` check, then prints
the proxy's RSS and peak (VmHWM) from /proc: before, after the load, and WAIT seconds later
(default 35: past the 30 s unauthorized TTL). Loopback only; every loop is bounded.
Usage: sar-cache-memory.py URL PID [REVIEWS] [GROUPS] [WAIT]"""
import http.client, json, os, ssl, sys, time

url, pid = sys.argv[1], int(sys.argv[2])
reviews = int(sys.argv[3]) if len(sys.argv) > 3 else 260
groups = int(sys.argv[4]) if len(sys.argv) > 4 else 20000
wait = float(sys.argv[5]) if len(sys.argv) > 5 else 35

def mem():
    fields = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                fields[k] = int(v.split()[0]) / 1024
    return f"RSS {fields['VmRSS']:.1f} MB, peak {fields['VmHWM']:.1f} MB"

host_port, path = url.removeprefix("https://").split("/", 1)
host, port = host_port.split(":")
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
here = os.path.dirname(os.path.abspath(__file__))
with open(os.path.join(here, "../tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json")) as f:
    review = json.load(f)
group_list = [f"oidc:team-{i:05d}.engineering.departments.groups.example.com" for i in range(groups)]
print("before:", mem(), flush=True)
conn = http.client.HTTPSConnection(host, int(port), context=ctx, timeout=30)
statuses = {}
started = time.time()
for i in range(reviews):
    review["request"]["uid"] = f"00000000-0000-0000-0000-{i:012d}"
    review["request"]["userInfo"] = {"username": f"user-{i}", "uid": f"uid-{i}", "groups": group_list}
    body = json.dumps(review).encode()
    conn.request("POST", "/" + path + "?timeout=10s", body, {"Content-Type": "application/json"})
    r = conn.getresponse()
    r.read()
    statuses[r.status] = statuses.get(r.status, 0) + 1
print(f"sent {reviews} reviews of {len(body) / 1e6:.2f} MB in {time.time() - started:.1f} s: {statuses}")
print("after the load:", mem(), flush=True)
time.sleep(wait)
print(f"{wait:.0f} s later:", mem(), flush=True)
