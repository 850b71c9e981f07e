#!/usr/bin/env python3
"""Memory per idle keep-alive connection of examples/http_server, over TLS
(--tls) and plain: opens N connections that each make one request and then
idle, and prints the server's RSS growth per connection.

  python3 bench/net/https_idle.py [N=1000] [server binary]
"""
import os
import resource
import socket
import ssl
import subprocess
import sys
import tempfile
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
binary = sys.argv[2] if len(sys.argv) > 2 else "build/release/examples/http_server"
resource.setrlimit(resource.RLIMIT_NOFILE, (max(4 * n, 1024), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
tmp = tempfile.mkdtemp(prefix="shoal-https-idle-")
cert, key = os.path.join(tmp, "cert.pem"), os.path.join(tmp, "key.pem")
subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-days", "2", "-subj", "/CN=localhost", "-keyout", key, "-out", cert],
               check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
client_ctx = ssl.create_default_context(cafile=cert)
client_ctx.check_hostname = False


def measure(tls):
    args = [binary, "127.0.0.1:0", str(2 * n)] + (["--tls", cert, key] if tls else [])
    server = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=dict(os.environ, SHOAL_THREADS="2"))
    port = int(server.stdout.readline().split()[-1].rsplit(b":", 1)[1])

    def rss():
        for line in open(f"/proc/{server.pid}/status"):
            if line.startswith("VmRSS"):
                return int(line.split()[1])

    def one():
        s = socket.create_connection(("127.0.0.1", port))
        if tls:
            s = client_ctx.wrap_socket(s)
        s.sendall(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        got = b""
        while not got.endswith(b"Hello, world!"):
            got += s.recv(4096)
        return s

    warm = [one() for _ in range(50)]  # the first connections grow pools that later ones reuse
    time.sleep(0.3)
    base = rss()
    conns = [one() for _ in range(n)]
    time.sleep(0.5)
    grown = rss() - base
    for s in conns + warm:
        s.close()
    server.terminate()
    server.wait()
    return grown * 1024 / n


plain = measure(False)
secure = measure(True)
print(f"{n} idle keep-alive connections: plain {plain:,.0f} B each, TLS {secure:,.0f} B each")
