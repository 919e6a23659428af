#!/usr/bin/env python3
"""Two HTTPS targets measured in one run: `bench --target A --compare B` (alternating 1 s rounds,
2000 req/s, 16 keep-alive connections, 2 s warm-up, 20 s), RUNS times, with each serving
process's CPU per request (utime + stime from /proc/PID/stat over the run / requests measured).
Prints each run and the medians. Setup: benches/README.md ("Setup (reproduce)").

Usage: python3 benches/head-to-head.py URL_A PID_A URL_B PID_B [RUNS]
  e.g. the proxy (:19444) against nginx's worker (:19445):
  python3 benches/head-to-head.py https://127.0.0.1:19444/webhooks/forward.bench.example.com \
      $(pgrep -f 'admission-proxy serve') https://127.0.0.1:19445/allow $(pgrep -f 'nginx: worker') 3
Environment: BIN (the admission-proxy binary whose `bench` runs the load; default
target/release/admission-proxy), CERT (the CA of both targets; default /tmp/m/cert.pem),
REVIEWS (default tests/fixtures/admission-reviews)."""
import json, os, statistics, subprocess, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("BIN", os.path.join(ROOT, "target", "release", "admission-proxy"))
CERT = os.environ.get("CERT", "/tmp/m/cert.pem")
REVIEWS = os.environ.get("REVIEWS", os.path.join(ROOT, "tests", "fixtures", "admission-reviews"))
P = ["p50", "p90", "p99", "p99.9"]


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main():
    url_a, pid_a, url_b, pid_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    rows = []
    for run in range(runs):
        a0, b0 = cpu_seconds(pid_a), cpu_seconds(pid_b)
        out = subprocess.run(
            [BIN, "bench", "--target", url_a, "--compare", url_b, "--cacert", CERT,
             "--rate", "2000", "--duration", "20", "--warmup", "2", "--connections", "16",
             "--output", "json", "--reviews", REVIEWS],
            capture_output=True, text=True, check=True).stdout
        a1, b1 = cpu_seconds(pid_a), cpu_seconds(pid_b)
        targets = {t["target"]: t for t in json.loads(out)["targets"]}
        a, b = targets[url_a], targets[url_b]
        assert not a["errors"] and not b["errors"], (a["errors"], b["errors"])
        row = {f"A_{p}": a["latency_ms"][p] for p in P}
        row.update({f"B_{p}": b["latency_ms"][p] for p in P})
        row["A_cpu_us"] = (a1 - a0) * 1e6 / a["requests"]
        row["B_cpu_us"] = (b1 - b0) * 1e6 / b["requests"]
        rows.append(row)
        print(run, {k: round(v, 3) for k, v in row.items()}, flush=True)
    print("medians:", " ".join(f"{k}={statistics.median(r[k] for r in rows):.3f}" for k in rows[0]))


if __name__ == "__main__":
    main()
