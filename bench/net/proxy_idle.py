#!/usr/bin/env python3
"""Memory per idle stdio_proxy session: starts examples/stdio_proxy in front
of `cat`, opens N sessions that each move 1 KB both ways and then idle, and
prints the proxy's RSS growth per session (its commands' memory is theirs).

  python3 bench/net/proxy_idle.py [N=2000] [proxy binary]
"""
import resource
import socket
import subprocess
import sys
import time

n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
binary = sys.argv[2] if len(sys.argv) > 2 else "build/release/examples/stdio_proxy"
resource.setrlimit(resource.RLIMIT_NOFILE, (max(4 * n, 1024), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
proxy = subprocess.Popen([binary, "127.0.0.1:0", "cat"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
port = int(proxy.stdout.readline().split()[1].rsplit(b":", 1)[1])


def status(key):
    for line in open(f"/proc/{proxy.pid}/status"):
        if line.startswith(key):
            return int(line.split()[1])


base = status("VmRSS")
sessions = []
for _ in range(n):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"x" * 1000 + b"\n")
    got = b""
    while len(got) < 1001:
        got += s.recv(4096)
    sessions.append(s)
time.sleep(0.5)
after = status("VmRSS")
print(f"{n} idle sessions: proxy RSS {base} -> {after} KiB, {(after - base) * 1024 / n:.0f} B per session, "
      f"{status('Threads')} threads")
for s in sessions:
    s.close()
proxy.terminate()
proxy.wait(timeout=60)
