#!/usr/bin/env python3
"""A stand-in Kubernetes API server for benches/breakglass-head-to-head.sh: answers every
SubjectAccessReview POST on 127.0.0.1:19700 "not allowed" (201, the review echoed with its
status) and writes one line per review to stderr."""
import json, sys
from http.server import ThreadingHTTPServer, BaseHTTPRequestHandler
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        body["status"] = {"allowed": False}
        out = json.dumps(body).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(out)))
        self.end_headers()
        self.wfile.write(out)
        sys.stderr.write("sar\n")
    def log_message(self, *a): pass
ThreadingHTTPServer(("127.0.0.1", 19700), H).serve_forever()
