#!/usr/bin/env python3
# A stdio MCP server whose writes block (plain blocking stdout, unlike
# Node's): tools "pid", "close_stdin" (then it sleeps), and "flood" (count progress notifications of size
# bytes each, then the result; how many it has written so far goes to
# sent_file), for the gateway's backpressure check.
import json
import os
import sys
import time


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m:
        continue
    if m["method"] == "initialize":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {
            "protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
            "serverInfo": {"name": "flood", "version": "1"}}})
    elif m["method"] == "tools/call" and m["params"]["name"] == "pid":
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": str(os.getpid())}]}})
    elif m["method"] == "tools/call" and m["params"]["name"] == "flood":
        args = m["params"]["arguments"]
        token = m["params"]["_meta"]["progressToken"]
        pad = "x" * args["size"]
        for i in range(1, args["count"] + 1):
            send({"jsonrpc": "2.0", "method": "notifications/progress",
                  "params": {"progressToken": token, "progress": i, "message": pad}})
            with open(args["sent_file"] + ".tmp", "w") as f:  # how far it got, for the test
                f.write(str(i))
            os.replace(args["sent_file"] + ".tmp", args["sent_file"])  # whole, never seen half-written
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "flooded"}]}})
    elif m["method"] == "tools/call" and m["params"]["name"] == "close_stdin":
        # Takes no more input but lives on, its stdout open. Closed before
        # the answer: the client sends its next request once it has the
        # answer, and a request the gateway wrote into the pipe before the
        # close would be lost unanswered (the TSan leg hit that: a 10 s
        # timeout instead of the 502).
        os.close(0)
        send({"jsonrpc": "2.0", "id": m["id"], "result": {"content": [{"type": "text", "text": "closed"}]}})
        time.sleep(3600)
    else:
        send({"jsonrpc": "2.0", "id": m["id"], "error": {"code": -32601, "message": "no such method"}})
