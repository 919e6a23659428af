#!/usr/bin/env python3
"""Runs the README result table: `bench --compare` pairs (proxy/nginx/skip vs direct, proxy vs
nginx), N times interleaved, and prints medians. Expects the setup of benches/README.md:
stand-in on :19443, proxy on :19444, nginx on :19445
(benches/nginx-reference.conf), their CA in $CERT (default /tmp/m/cert.pem), each server started
with setsid so that none shares this script's scheduling group (benches/README.md, "Scheduling
groups"; head-to-head.py checks it). Usage: python3 benches/compare-runs.py [RUNS]"""
import json, subprocess, statistics, sys
import os
B=os.path.join(os.path.dirname(os.path.abspath(__file__)),"..","target","release","admission-proxy")
CERT=os.environ.get("CERT","/tmp/m/cert.pem")
U={"proxy":"https://127.0.0.1:19444/webhooks/forward.bench.example.com",
   "skip":"https://127.0.0.1:19444/webhooks/skip.bench.example.com",
   "nginx":"https://127.0.0.1:19445/allow","direct":"https://127.0.0.1:19443/allow"}
pairs=[("proxy","direct"),("nginx","direct"),("skip","direct"),("proxy","nginx")]
reps=int(sys.argv[1]) if len(sys.argv)>1 else 3
P=["p50","p90","p99","p99.9","max"]
res={}
for r in range(reps):
  for a,b in pairs:
    out=subprocess.run([B,"bench","--target",U[a],"--compare",U[b],"--cacert",CERT,"--rate","2000","--duration","20","--warmup","2","--connections","16","--output","json"],capture_output=True,text=True).stdout
    d=json.loads(out); t={x["target"]:x for x in d["targets"]}
    la=t[U[a]]["latency_ms"]; lb=t[U[b]]["latency_ms"]
    assert not t[U[a]]["errors"] and not t[U[b]]["errors"], (t[U[a]]["errors"],t[U[b]]["errors"])
    res.setdefault((a,b),[]).append((la,lb,d["generator_max_lag_ms"]))
    print(r,a,b,{p:round(la[p]-lb[p],3) for p in P},"lag",round(d["generator_max_lag_ms"],1),flush=True)
print("\nmedians over",reps,"runs")
for (a,b),runs in res.items():
  ma={p:statistics.median(x[0][p] for x in runs) for p in P}
  mb={p:statistics.median(x[1][p] for x in runs) for p in P}
  md={p:statistics.median(x[0][p]-x[1][p] for x in runs) for p in P}
  mr={p:statistics.median(x[0][p]/x[1][p] for x in runs) for p in P}
  print(f"{a} vs {b}")
  print("  ",a," ".join(f"{p}={ma[p]:.3f}" for p in P))
  print("  ",b," ".join(f"{p}={mb[p]:.3f}" for p in P))
  print("   added"," ".join(f"{p}={md[p]:+.3f}" for p in P))
  print("   ratio"," ".join(f"{p}={mr[p]:.2f}x" for p in P))
