#!/usr/bin/env python3
"""Two HTTPS targets measured in one run: `bench --target A --compare B` (alternating 1 s rounds,
2000 req/s, 16 keep-alive connections, 2 s warm-up, 20 s), RUNS times, with each serving
process's CPU per request (utime + stime from /proc/PID/stat over the run / requests measured,
also split into user and system time) and its context switches per request (voluntary: it
slept waiting for I/O; involuntary: it was preempted), summed over the process's threads.
Prints each run and the medians. Setup: benches/README.md ("Setup (reproduce)").

Scheduling groups: with autogroup on (/proc/sys/kernel/sched_autogroup_enabled = 1), every
session is one group that the scheduler weighs as much as any other. A server started from the
load generator's session shares one group with it (and with whatever else runs there), while a
daemon that calls setsid (nginx) has a group to itself, and then is woken earlier on the
shared cores: the comparison measures the groups, not the servers (benches/README.md,
"Scheduling groups"). Each target must run in a session of its own (`setsid`); the script
refuses a run where a target shares the generator's group, unless ALLOW_SHARED_GROUP=1.

Usage: python3 benches/head-to-head.py URL_A PID_A URL_B PID_B [RUNS]
  e.g. the proxy (:19444) against nginx's worker (:19445):
  python3 benches/head-to-head.py https://127.0.0.1:19444/webhooks/forward.bench.example.com \\
      $(pgrep -f 'admission-proxy serve') https://127.0.0.1:19445/allow $(pgrep -f 'nginx: worker') 3
Environment: BIN (the admission-proxy binary whose `bench` runs the load; default
target/release/admission-proxy), CERT (the CA of both targets; default /tmp/m/cert.pem),
REVIEWS (default tests/fixtures/admission-reviews), RATE (default 2000), DURATION (s, default 20).
"""
import json, os, statistics, subprocess, sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("BIN", os.path.join(ROOT, "target", "release", "admission-proxy"))
CERT = os.environ.get("CERT", "/tmp/m/cert.pem")
REVIEWS = os.environ.get("REVIEWS", os.path.join(ROOT, "tests", "fixtures", "admission-reviews"))
RATE = os.environ.get("RATE", "2000")
DURATION = os.environ.get("DURATION", "20")
P = ["p50", "p90", "p99", "p99.9"]


# The proxy's background lane thread (Shadow calls, candidates): its CPU is also reported apart.
LANE_THREAD = "admission-bg"


def counters(pid):
    """utime and stime (s) of the process, voluntary and involuntary switches of its threads,
    and the CPU (s) of its background lane thread, if it has one."""
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    tick = os.sysconf("SC_CLK_TCK")
    switches = [0, 0]
    lane = 0.0
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            comm, rest = open(f"/proc/{pid}/task/{task}/stat").read().split("(", 1)[1].rsplit(")", 1)
            if comm == LANE_THREAD:
                t = rest.split()
                lane += (int(t[11]) + int(t[12])) / tick
            for line in open(f"/proc/{pid}/task/{task}/status"):
                if line.startswith("voluntary_ctxt_switches"):
                    switches[0] += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    switches[1] += int(line.split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return [int(fields[11]) / tick, int(fields[12]) / tick] + switches + [lane]


def autogroup(pid):
    """The process's autogroup (e.g. '/autogroup-12'), or None where autogroup is off."""
    try:
        if open("/proc/sys/kernel/sched_autogroup_enabled").read().strip() != "1":
            return None
        return open(f"/proc/{pid}/autogroup").read().split()[0]
    except OSError:
        return None


def check_groups(pids):
    mine = autogroup(os.getpid())
    shared = [pid for pid in pids if mine is not None and autogroup(pid) == mine]
    if shared and os.environ.get("ALLOW_SHARED_GROUP") != "1":
        sys.exit(f"process(es) {shared} share the load generator's scheduling group ({mine}): "
                 "start each target with setsid (benches/README.md, 'Scheduling groups'), "
                 "or set ALLOW_SHARED_GROUP=1 to measure anyway")
    print("scheduling groups:", {pid: autogroup(pid) for pid in pids}, "generator:", mine, flush=True)


def main():
    url_a, pid_a, url_b, pid_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 3
    check_groups([pid_a, pid_b])
    rows = []
    for run in range(runs):
        before = {pid_a: counters(pid_a), pid_b: counters(pid_b)}
        out = subprocess.run(
            [BIN, "bench", "--target", url_a, "--compare", url_b, "--cacert", CERT,
             "--rate", RATE, "--duration", DURATION, "--warmup", "2", "--connections", "16",
             "--output", "json", "--reviews", REVIEWS],
            capture_output=True, text=True, check=True).stdout
        after = {pid_a: counters(pid_a), pid_b: counters(pid_b)}
        targets = {t["target"]: t for t in json.loads(out)["targets"]}
        row = {}
        for side, url, pid in (("A", url_a, pid_a), ("B", url_b, pid_b)):
            t = targets[url]
            assert not t["errors"], t["errors"]
            n = t["requests"]
            row.update({f"{side}_{p}": t["latency_ms"][p] for p in P})
            usr, sys_, vcs, ivcs, lane = (a - b for a, b in zip(after[pid], before[pid]))
            row[f"{side}_cpu_us"] = (usr + sys_) * 1e6 / n
            row[f"{side}_user_us"] = usr * 1e6 / n
            row[f"{side}_sys_us"] = sys_ * 1e6 / n
            row[f"{side}_lane_us"] = lane * 1e6 / n
            row[f"{side}_cs_voluntary"] = vcs / n
            row[f"{side}_cs_involuntary"] = ivcs / n
        rows.append(row)
        print(run, {k: round(v, 3) for k, v in row.items()}, flush=True)
    print("medians:", " ".join(f"{k}={statistics.median(r[k] for r in rows):.3f}" for k in rows[0]))


if __name__ == "__main__":
    main()
