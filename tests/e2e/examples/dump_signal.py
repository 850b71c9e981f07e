#!/usr/bin/env python3
"""The examples that run until a signal answer `kill -USR1` with a task dump.

For each of http_server, chat_server and stdio_proxy: start it on
127.0.0.1 port 0, connect one client, send SIGUSR1, and wait (at most 10 s)
for the dump on its stderr to name the client's handler ("connection from
127.0.0.1:PORT", serve's task name). Then SIGTERM, which must end it.
Usage: dump_signal.py <examples dir>
"""
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time


def first_line(proc, timeout):
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    if not ready:
        raise SystemExit(f"{proc.args[0]}: printed nothing in {timeout} s")
    return proc.stdout.readline().decode()


def check(name, argv, hello):
    with tempfile.TemporaryFile() as err:
        # SHOAL_TEST_EMULATOR: the emulator that starts a cross-built binary.
        argv = os.environ.get("SHOAL_TEST_EMULATOR", "").split() + argv
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
        try:
            line = first_line(proc, 10)
            addr = next(w for w in line.replace("://", " ").split() if w.startswith("127.0.0.1:"))
            host, port = addr.rsplit(":", 1)
            client = socket.create_connection((host, int(port)), timeout=10)
            client.sendall(hello)
            mine = "connection from 127.0.0.1:%d" % client.getsockname()[1]
            deadline = time.monotonic() + 10
            text = ""
            while mine not in text and time.monotonic() < deadline:
                proc.send_signal(signal.SIGUSR1)  # again until the handler is in the dump
                time.sleep(0.05)
                err.seek(0)
                text = err.read().decode(errors="replace")
            if mine not in text:
                raise SystemExit(f"{name}: no task dump naming '{mine}' on stderr after SIGUSR1:\n{text[-2000:]}")
            proc.send_signal(signal.SIGTERM)
            client.close()
            code = proc.wait(timeout=10)
            if code != 0:
                raise SystemExit(f"{name}: exit status {code} after SIGTERM")
            print(f"{name}: SIGUSR1 dumped its tasks, naming '{mine}'; SIGTERM ended it")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def main():
    d = sys.argv[1]
    check("http_server", [os.path.join(d, "http_server"), "127.0.0.1:0", "100"], b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    check("chat_server", [os.path.join(d, "chat_server"), "127.0.0.1:0"], b"alice\n")
    check("stdio_proxy", [os.path.join(d, "stdio_proxy"), "127.0.0.1:0", "cat"], b"hello\n")
    print("3 passed, 0 failed")


main()
