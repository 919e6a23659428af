#!/usr/bin/env python3
"""The proxy's memory under what a backend, a request or a disagreement may send it (docs/operating.md,
"Memory: sizing the sidecar's limit"): starts BINARY `serve` beside a stand-in backend on
127.0.0.1:19801 and measures the proxy's RSS peak (VmHWM, from /proc) through four loads:

  legacy-stream     64 admissions at once to a legacy webhook whose backend streams an endless
                    chunked body (failurePolicy Ignore, timeoutSeconds 30)
  candidate-stream  256 admissions to a webhook whose candidate backend streams an endless body
  candidate-hang    300 AdmissionReviews of 2 MiB to a webhook whose candidate backend answers
                    nothing for 30 s (the work queued on the background lane)
  deep-capture      one review nested 9,000 deep (19 KB) on which a candidate disagrees: the
                    capture file written

Run in the directory of benches/README.md "Setup (reproduce)" (cert.pem, key.pem). Loopback
only; every loop is bounded (a stream stops after 256 MiB, a hang after 35 s).
Usage: bounded-memory.py BINARY [LOAD...] (default: all four; a build without the bounds needs
more memory than the machine has for the two streams)"""
import http.client, http.server, json, os, re, socketserver, ssl, subprocess, sys, threading, time

binary = sys.argv[1]
loads = sys.argv[2:] or ["legacy-stream", "candidate-stream", "candidate-hang", "deep-capture"]
PORT, BACKEND = 19803, 19801
here = os.getcwd()


class Backend(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_POST(self):
        length = int(self.headers.get("Content-Length", 0))
        raw = self.rfile.read(length).decode()
        # Read as text: json.loads gives up on the deep review.
        uid = (re.search(r'"uid":\s*"([^"]*)"', raw) or [None, ""])[1]
        version = (re.search(r'"apiVersion":\s*"(admission[^"]*)"', raw) or [None, "admission.k8s.io/v1"])[1]
        answer = {"apiVersion": version, "kind": "AdmissionReview",
                  "response": {"uid": uid, "allowed": not self.path.startswith("/deny")}}
        if self.path.startswith("/stream"):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            chunk = b"10000\r\n" + b" " * 0x10000 + b"\r\n"
            try:
                for _ in range(4096):
                    self.wfile.write(chunk)
            except OSError:
                pass
            self.close_connection = True
            return
        if self.path.startswith("/hang"):
            time.sleep(35)
        body = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512


server = Server(("127.0.0.1", BACKEND), Backend)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain("cert.pem", "key.pem")
server.socket = ctx.wrap_socket(server.socket, server_side=True)
threading.Thread(target=server.serve_forever, daemon=True).start()

ca = __import__("base64").b64encode(open("cert.pem", "rb").read()).decode()
rules = '[{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*/*"]}]'


def webhook(name, path, extra=""):
    return f"""- name: {name}
  clientConfig: {{url: "https://127.0.0.1:{BACKEND}{path}", caBundle: "{ca}"}}
  rules: {rules}
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 30
  admissionReviewVersions: [v1]
{extra}"""


def candidate(name, hook, path):
    return f"""---
apiVersion: admission-proxy.io/v1alpha1
kind: Candidate
metadata: {{name: {name}}}
spec:
  webhook: {hook}
  backend:
    clientConfig: {{url: "https://127.0.0.1:{BACKEND}{path}", caBundle: "{ca}"}}
    admissionReviewVersions: [v1]
    timeoutSeconds: 30
"""


os.makedirs("conf-bounded", exist_ok=True)
with open("conf-bounded/w.yaml", "w") as f:
    f.write("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\n"
            "metadata: {name: bounded}\nwebhooks:\n")
    for name, path in [("stream.legacy", "/stream"), ("mirror.stream", "/allow"),
                       ("mirror.hang", "/allow"), ("mirror.deny", "/allow")]:
        f.write(webhook(f"{name}.example.com", path))
    f.write(candidate("streams", "mirror.stream.example.com", "/stream"))
    f.write(candidate("hangs", "mirror.hang.example.com", "/hang"))
    f.write(candidate("denies", "mirror.deny.example.com", "/deny"))
os.makedirs("captures-bounded", exist_ok=True)
for old in os.listdir("captures-bounded"):
    os.remove(os.path.join("captures-bounded", old))
proxy = None


def start():
    """A fresh `serve`, so that each load is measured from the same base."""
    global proxy
    if proxy is not None:
        proxy.terminate()
        proxy.wait(timeout=10)
    log = open("bounded-memory.log", "w")
    proxy = subprocess.Popen([binary, "serve", "--config", "conf-bounded", "--listen", f"127.0.0.1:{PORT}",
                              "--tls-cert-file", "cert.pem", "--tls-private-key-file", "key.pem",
                              "--capture-dir", "captures-bounded", "--capture-sample", "0"],
                             stdout=log, stderr=log)
    for _ in range(100):
        if "listening" in open("bounded-memory.log").read():
            break
        time.sleep(0.1)


def status():
    fields = {}
    with open(f"/proc/{proxy.pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmRSS", "VmHWM"):
                fields[k] = int(v.split()[0]) / 1024
    return fields


client_ctx = ssl.create_default_context()
client_ctx.check_hostname = False
client_ctx.verify_mode = ssl.CERT_NONE
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                       "../tests/fixtures/admission-reviews/0096-create-core-v1-pods-v1.json")) as f:
    fixture = json.load(f)


def send(hook, body, n, connections):
    def worker(count):
        conn = http.client.HTTPSConnection("127.0.0.1", PORT, context=client_ctx, timeout=60)
        for _ in range(count):
            conn.request("POST", f"/webhooks/{hook}?timeout=30s", body, {"Content-Type": "application/json"})
            r = conn.getresponse()
            r.read()
        conn.close()
    threads = [threading.Thread(target=worker, args=(n // connections,)) for _ in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def phase(name, run, settle=0.0):
    if name not in loads:
        return
    start()
    time.sleep(1)
    before = status()["VmRSS"]
    started = time.time()
    run()
    time.sleep(settle)
    s = status()
    print(f"{name}: RSS before {before:.1f} MB, peak {s['VmHWM']:.1f} MB, after {s['VmRSS']:.1f} MB "
          f"({time.time() - started:.1f} s)", flush=True)


small = json.dumps(fixture).encode()
big_review = dict(fixture)
big_review["request"] = dict(fixture["request"])
big_review["request"]["object"] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                                   "spec": {"padding": "x" * (2 << 20)}}
big = json.dumps(big_review).encode()
phase("legacy-stream", lambda: send("stream.legacy.example.com", small, 64, 64))
phase("candidate-stream", lambda: send("mirror.stream.example.com", small, 256, 16), settle=3)
phase("candidate-hang", lambda: send("mirror.hang.example.com", big, 300, 4), settle=2)
deep = '{"deep":' + "[" * 9000 + "1" + "]" * 9000 + "}"
text = json.dumps(fixture).replace('"metadata":', '"deepSpec": DEEP, "metadata":', 1).replace("DEEP", deep, 1)
phase("deep-capture", lambda: send("mirror.deny.example.com", text.encode(), 1, 1), settle=2)
files = [os.path.join("captures-bounded", f) for f in os.listdir("captures-bounded")]
if "deep-capture" in loads:
    print(f"deep-capture: review {len(text)} bytes; capture files: {[os.path.getsize(f) for f in files]}")
proxy.terminate()
proxy.wait(timeout=10)
