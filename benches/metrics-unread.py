#!/usr/bin/env python3
"""RSS of admission-proxy serve with N clients of /metrics that never read (loopback).

usage: python3 benches/metrics-unread.py BINARY N [N ...]
Environment: DIR (a directory holding tls.crt and tls.key for 127.0.0.1, e.g. made with the
openssl line of benches/README.md "Setup"; the configuration and the proxy's log are written
there too; default the current directory), WEBHOOKS (437).
A fresh process per N: WEBHOOKS webhooks (bench --synthetic-config), one admission to each
(so that each webhook's histograms and failure class exist, as after traffic), then N TLS
clients with 4 KiB receive buffers send GET /metrics on the admission port and never read.
Prints the scrape size, RSS before, after, and VmHWM. Bounded: every wait has a timeout.
"""
import json, os, socket, ssl, subprocess, sys, time

BIN = sys.argv[1]
COUNTS = [int(n) for n in sys.argv[2:]]
WEBHOOKS = int(os.environ.get("WEBHOOKS", "437"))
DIR = os.environ.get("DIR", os.getcwd())
FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                       "admission-reviews", "0096-create-core-v1-pods-v1.json")

def status(pid):
    out = {}
    for line in open(f"/proc/{pid}/status"):
        k, _, v = line.partition(":")
        if k in ("VmRSS", "VmHWM"):
            out[k] = int(v.split()[0]) * 1024
    return out

def tls_connect(port, rcvbuf=None):
    ctx = ssl.create_default_context(cafile=f"{DIR}/tls.crt")
    s = socket.socket()
    if rcvbuf:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    s.settimeout(20)
    s.connect(("127.0.0.1", port))
    return ctx.wrap_socket(s, server_hostname="127.0.0.1")

def request(port, method, path, body=b""):
    c = tls_connect(port)
    c.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
    data = b""
    while True:
        try:
            chunk = c.recv(1 << 20)
        except (ssl.SSLError, OSError):
            break
        if not chunk:
            break
        data += chunk
    c.close()
    return data

def run(n):
    conf = f"{DIR}/conf"
    os.makedirs(conf, exist_ok=True)
    yaml = subprocess.run([BIN, "bench", "--synthetic-config", str(WEBHOOKS), "--backend-url", "https://127.0.0.1:9/never"], capture_output=True, check=True).stdout
    open(f"{conf}/webhooks.yaml", "wb").write(yaml)
    p = subprocess.Popen([BIN, "--log-json", "serve", "--listen", "127.0.0.1:0", "--config", conf,
                          "--tls-cert-file", f"{DIR}/tls.crt", "--tls-private-key-file", f"{DIR}/tls.key",
                          "--write-timeout-seconds", "120", "--max-connections", "4096"],
                         stderr=open(f"{DIR}/proxy.log", "wb"), stdout=subprocess.DEVNULL)
    port = None
    deadline = time.time() + 60
    while port is None and time.time() < deadline:
        time.sleep(0.2)
        for line in open(f"{DIR}/proxy.log"):
            if "admission-proxy listening" in line:
                port = int(json.loads(line)["fields"]["address"].rsplit(":", 1)[1])
    assert port, "no address"
    review = open(FIXTURE, "rb").read()
    for i in range(WEBHOOKS):
        request(port, "POST", f"/webhooks/hook-{i}.bench.example.com?timeout=10s", review)
    scrape = request(port, "GET", "/metrics")
    size = len(scrape.split(b"\r\n\r\n", 1)[1])
    time.sleep(6)  # the metrics upkeep (5 s) runs once: what a scrape left is settled
    before = status(p.pid)
    clients = []
    for _ in range(n):
        c = tls_connect(port, rcvbuf=4096)
        c.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        clients.append(c)
    # Until RSS settles (two samples 0.5 s apart within 1 MB), at most 60 s.
    last = status(p.pid)["VmRSS"]
    for _ in range(120):
        time.sleep(0.5)
        now = status(p.pid)["VmRSS"]
        if abs(now - last) < 1_000_000:
            break
        last = now
    after = status(p.pid)
    p.terminate()
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
    for c in clients:
        c.close()
    print(json.dumps({"clients": n, "webhooks": WEBHOOKS, "scrape_bytes": size,
                      "rss_before_mb": round(before["VmRSS"] / 1e6, 1),
                      "rss_after_mb": round(after["VmRSS"] / 1e6, 1),
                      "hwm_mb": round(after["VmHWM"] / 1e6, 1)}), flush=True)

for n in COUNTS:
    run(n)
