#!/usr/bin/env python3
"""Faults under load, and memory across reloads (benches/README.md, "Soak").

soak:   1,500 admissions/s for 60 s through the proxy (the proxy's own `bench`), while the
        legacy backend is killed (SIGKILL) and restarted twice, the configuration directory is
        rewritten 50 times (valid and invalid versions, atomic renames and in-place writes),
        the serving certificate is rotated, and SIGTERM ends the proxy. Reports answers by
        class, wrong answers, answers after the caller's deadline, uids the backend received
        twice (its uid log survives the kills), and the proxy's RSS and open fds before/after.
memory: 1,000 webhooks (`bench --synthetic-config`), reloaded 100 times; RSS after start and
        after every reload.

Usage: python3 benches/soak.py [soak|memory|all]   (needs openssl; builds nothing: uses
BIN=target/release/admission-proxy). Exits 1 when a soak invariant is broken.
"""
import json, os, shutil, signal, ssl, subprocess, sys, tempfile, threading, time, urllib.request

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
BIN = os.environ.get("BIN", os.path.join(ROOT, "target", "release", "admission-proxy"))
REVIEWS = os.path.join(ROOT, "tests", "fixtures", "admission-reviews")
PROXY_PORT, BACKEND_PORT = 19544, 19543


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, **kw)


def make_pki(d):
    """A CA and two serving certificates for 127.0.0.1 (the second for the rotation)."""
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-days", "2", "-subj", "/CN=soak-ca", "-keyout", f"{d}/ca.key", "-out", f"{d}/ca.pem")
    for name in ("leaf1", "leaf2"):
        sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
           "-subj", "/CN=127.0.0.1", "-keyout", f"{d}/{name}.key", "-out", f"{d}/{name}.csr")
        with open(f"{d}/ext.cnf", "w") as f:
            f.write("subjectAltName=IP:127.0.0.1\nbasicConstraints=critical,CA:FALSE\n")
        sh("openssl", "x509", "-req", "-in", f"{d}/{name}.csr", "-CA", f"{d}/ca.pem", "-CAkey",
           f"{d}/ca.key", "-CAcreateserial", "-days", "2", "-extfile", f"{d}/ext.cnf",
           "-out", f"{d}/{name}.pem")


def ca_bundle(d):
    import base64
    return base64.b64encode(open(f"{d}/ca.pem", "rb").read()).decode()


def config(d, variant):
    """A valid configuration (variants differ in timeoutSeconds and a label) or an invalid one."""
    if variant == "broken-yaml":
        return "apiVersion: admissionregistration.k8s.io/v1\nkind: [ValidatingWebhookConfiguration\n"
    policy = "Sometimes" if variant == "bad-field" else "Ignore"
    timeout = 5 if variant == "a" else 6
    return f"""apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {{name: soak, labels: {{variant: "{variant}"}}}}
webhooks:
- name: soak.example.com
  clientConfig: {{url: "https://127.0.0.1:{BACKEND_PORT}/allow", caBundle: "{ca_bundle(d)}"}}
  rules: [{{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}}]
  failurePolicy: {policy}
  timeoutSeconds: {timeout}
  sideEffects: None
  admissionReviewVersions: [v1, v1beta1]
"""


def write_atomically(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def usage(pid):
    rss = next(int(l.split()[1]) for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS"))
    return rss / 1024, len(os.listdir(f"/proc/{pid}/fd"))


def get(d, port, path):
    ctx = ssl.create_default_context(cafile=f"{d}/ca.pem")
    with urllib.request.urlopen(f"https://127.0.0.1:{port}{path}", context=ctx, timeout=5) as r:
        return r.read().decode()


def metrics(d, port):
    return get(d, port, "/metrics")


def start_backend(d):
    return subprocess.Popen([BIN, "bench", "--serve-backend", f"127.0.0.1:{BACKEND_PORT}",
                             "--tls-cert-file", f"{d}/leaf1.pem", "--tls-private-key-file",
                             f"{d}/leaf1.key", "--record-uids", f"{d}/uids.log"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def start_proxy(d, conf, log):
    p = subprocess.Popen([BIN, "serve", "--config", conf, "--listen", f"127.0.0.1:{PROXY_PORT}",
                          "--tls-cert-file", f"{d}/tls.crt", "--tls-private-key-file",
                          f"{d}/tls.key", "--resync-seconds", "5"],
                         stdout=subprocess.DEVNULL, stderr=open(log, "w"))
    for _ in range(100):
        try:
            get(d, PROXY_PORT, "/readyz")
            return p
        except Exception:
            time.sleep(0.1)
    raise SystemExit("the proxy did not start")


def error_lines(log):
    """ERROR lines of a proxy log, counted by message (the text before its first field)."""
    counts = {}
    for line in open(log):
        if " ERROR " in line:
            message = line.split(" ERROR ", 1)[1].split(": ", 1)[-1]
            message = message.split("=", 1)[0].rsplit(" ", 1)[0].strip()
            counts[message] = counts.get(message, 0) + 1
    return counts


def soak(d):
    conf = f"{d}/conf"
    os.makedirs(conf)
    write_atomically(f"{conf}/soak.yaml", config(d, "a"))
    shutil.copy(f"{d}/leaf1.pem", f"{d}/tls.crt")
    shutil.copy(f"{d}/leaf1.key", f"{d}/tls.key")
    backend = [start_backend(d)]
    proxy = start_proxy(d, conf, f"{d}/proxy.log")
    before = usage(proxy.pid)
    events = []
    t0 = time.monotonic()

    def at(t):
        time.sleep(max(0.0, t - (time.monotonic() - t0)))

    def faults():
        plan = [(10, "kill"), (13, "start"), (30, "kill"), (33, "start"), (40, "rotate"),
                (57, "usage"), (57.5, "sigterm")]
        plan += [(5 + i, f"config:{i}") for i in range(50)]
        for t, what in sorted(plan):
            at(t)
            if what == "kill":
                backend[0].kill()
                backend[0].wait()
            elif what == "start":
                backend[0] = start_backend(d)
            elif what == "rotate":
                # The certificate first, then its key: in between the pair does not match, the
                # proxy refuses it and keeps serving the old one.
                shutil.copy(f"{d}/leaf2.pem", f"{d}/tls.crt")
                time.sleep(0.2)
                shutil.copy(f"{d}/leaf2.key", f"{d}/tls.key")
            elif what == "usage":
                events.append(("usage", usage(proxy.pid)))
            elif what == "sigterm":
                proxy.send_signal(signal.SIGTERM)
            else:
                i = int(what.split(":")[1])
                variant = ["a", "b", "broken-yaml", "a", "bad-field"][i % 5]
                if i % 3 == 0:
                    with open(f"{conf}/soak.yaml", "w") as f:  # in place, as an editor does
                        f.write(config(d, variant))
                else:
                    write_atomically(f"{conf}/soak.yaml", config(d, variant))
            events.append((round(time.monotonic() - t0, 1), what))

    threading.Thread(target=faults, daemon=True).start()
    load = subprocess.run([BIN, "bench", "--target",
                           f"https://127.0.0.1:{PROXY_PORT}/webhooks/soak.example.com",
                           "--cacert", f"{d}/ca.pem", "--rate", "1500", "--duration", "60",
                           "--warmup", "0", "--connections", "16", "--output", "json",
                           "--reviews", REVIEWS], capture_output=True, text=True, check=True)
    report = json.loads(load.stdout)["targets"][0]
    try:
        proxy.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proxy.kill()
    backend[0].kill()
    uids = open(f"{d}/uids.log").read().split()
    after = next(v for k, v in events if k == "usage")
    wrong = sum(v for k, v in report["errors"].items() if k != "transport")
    wrong += sum(v for k, v in report["decisions"].items() if k not in ("allowed", "failed-open"))
    result = {
        "requests": report["requests"],
        "answers_by_decision": report["decisions"],
        "errors_by_class": report["errors"],
        "wrong_answers": wrong,
        "late_answers": report["late"],
        "backend_received": len(uids),
        "backend_received_twice": len(uids) - len(set(uids)),
        "latency_ms": report["latency_ms"],
        "proxy_rss_mb_fds_before": before,
        "proxy_rss_mb_fds_after": after,
        "proxy_exit_code": proxy.returncode,
        "proxy_log_errors": error_lines(f"{d}/proxy.log"),
    }
    print(json.dumps(result, indent=2))
    ok = (wrong == 0 and report["late"] == 0 and result["backend_received_twice"] == 0
          and report["errors"].get("transport", 0) == 0 and proxy.returncode == 0)
    return ok


def memory(d):
    conf = f"{d}/conf1000"
    os.makedirs(conf)
    shutil.copy(f"{d}/leaf1.pem", f"{d}/tls.crt")
    shutil.copy(f"{d}/leaf1.key", f"{d}/tls.key")
    text = sh(BIN, "bench", "--synthetic-config", "1000", "--backend-url",
              f"https://127.0.0.1:{BACKEND_PORT}/allow", "--cacert", f"{d}/ca.pem").stdout.decode()
    write_atomically(f"{conf}/webhooks.yaml", text)
    proxy = start_proxy(d, conf, f"{d}/proxy-memory.log")
    log = f"{d}/proxy-memory.log"
    reloads = lambda: open(log).read().count("webhook configuration reloaded")
    # Reloads are seen in the log, not on /metrics: scraping 20 times a second would measure
    # the exporter's rendering, not the reloads (Prometheus scrapes every 15-60 s).
    samples = [usage(proxy.pid)[0]]
    for i in range(100):
        before = reloads()
        write_atomically(f"{conf}/webhooks.yaml", text + f"# reload {i}\n")
        for _ in range(400):
            if reloads() > before:
                break
            time.sleep(0.05)
        else:
            raise SystemExit(f"reload {i} not seen")
        time.sleep(0.3)  # the log line comes before the swap and the release
        samples.append(usage(proxy.pid)[0])
    scraped = len(metrics(d, PROXY_PORT))
    time.sleep(6)  # one metrics upkeep tick (5 s), which releases what the render freed
    samples.append(usage(proxy.pid)[0])
    proxy.send_signal(signal.SIGTERM)
    proxy.wait(timeout=30)
    result = {"config_bytes": len(text), "metrics_bytes": scraped,
              "rss_mb_after_start": round(samples[0], 1),
              "rss_mb_max": round(max(samples), 1), "rss_mb_after_100_reloads": round(samples[-2], 1),
              "rss_mb_after_a_scrape": round(samples[-1], 1),
              "rss_mb_every_10th": [round(s, 1) for s in samples[::10]]}
    print(json.dumps(result, indent=2))
    return True


def main():
    phase = sys.argv[1] if len(sys.argv) > 1 else "all"
    d = tempfile.mkdtemp(prefix="admission-proxy-soak-")
    try:
        make_pki(d)
        ok = True
        if phase in ("soak", "all"):
            ok &= soak(d)
        if phase in ("memory", "all"):
            ok &= memory(d)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
