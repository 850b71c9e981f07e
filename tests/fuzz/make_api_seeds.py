#!/usr/bin/env python3
"""Writes the hand-made seed inputs of the API fuzzer into corpus/api/.

The byte format (decoded by api_program.cpp; a missing byte reads as 0):
  seed: 4 bytes little-endian          flags: channels = 1 + flags % 4, bit 4: a
  deadlock is ended by cancelling the root scope first; one byte per channel:
  capacity = [0, 1, 2, 3, 4, 8][b % 6], bit 7: a value type whose move may throw.
  block: b (children = b % 4, bit 7: Task<int> body), the children's lists, the body's list.
  list: b (length = b % 9), then per op: kind byte (% 21) and operand byte; a
  scope op is followed by its block, spawn/deadline/shielded/start+join by their list.
Operands: channel = arg % channels; cancel_scope: levels up = arg % 3; scope and
deadline: bit 3 catches faults; deadline: bit 0 with_timeout (else
move_on_after), bits 1-2: 1 tiny, 2 long, else zero; select: a recv on
channel arg % channels and one on (arg / 16 + that) % channels, and the run's
Notify; notify: notify_one of that Notify; broadcast send/recv and watch
send/changed use the run's Broadcast (capacity 3) and Watch.
"""
import os
import sys

(SEND, RECV, TRY_SEND, TRY_RECV, CLOSE, IS_CLOSED, CHECKPOINT, SLEEP0, FAULT,
 CANCEL_SCOPE, SCOPE, SPAWN, DEADLINE, SHIELDED, START_JOIN, SELECT, NOTIFY,
 BCAST_SEND, BCAST_RECV, WATCH_SEND, WATCH_CHANGED) = range(21)
CAPS = [0, 1, 2, 3, 4, 8]


def program(seed, channels, root, break_by_cancel=False):
    """channels: list of (capacity, throwing_move); root: a block()."""
    out = bytes([seed & 255, (seed >> 8) & 255, (seed >> 16) & 255, (seed >> 24) & 255])
    out += bytes([(len(channels) - 1) | (0x10 if break_by_cancel else 0)])
    for cap, throwing in channels:
        out += bytes([CAPS.index(cap) | (0x80 if throwing else 0)])
    return out + root


def block(children, body, value_body=False):
    out = bytes([len(children) | (0x80 if value_body else 0)])
    for c in children:
        out += c
    return out + body


def ops(*items):
    """items: (kind, arg) or (kind, arg, nested bytes)."""
    out = bytes([len(items)])
    for it in items:
        out += bytes([it[0], it[1]])
        if len(it) > 2:
            out += it[2]
    return out


def deadline_arg(timeout, kind, catch=False):
    k = {"zero": 0, "tiny": 1, "long": 2}[kind]
    return (1 if timeout else 0) | (k << 1) | (8 if catch else 0)


SEEDS = {
    # Rendezvous: each send meets a recv.
    "rendezvous-ping-pong": program(1, [(0, False)], block(
        [ops((SEND, 0), (SEND, 0), (SEND, 0))], ops((RECV, 0), (RECV, 0), (RECV, 0)))),
    # Two senders into a ring buffer; one receiver; per-sender FIFO.
    "ring-two-senders-fifo": program(2, [(4, False)], block(
        [ops((SEND, 0), (SEND, 0), (SEND, 0), (SEND, 0), (SEND, 0)), ops((SEND, 0), (SEND, 0), (SEND, 0))],
        ops((RECV, 0), (RECV, 0), (TRY_RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0)))),
    # The same on the lock path (a value whose move may throw), capacity 3.
    "lock-path-two-senders": program(3, [(3, True)], block(
        [ops((SEND, 0), (SEND, 0), (SEND, 0), (SEND, 0)), ops((SEND, 0), (SEND, 0), (SEND, 0))],
        ops((RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0), (RECV, 0)))),
    # One task, try_* only: the exact sequential model (sent, sent, full, values, empty, closed).
    "try-ops-sequential": program(4, [(2, False)], block([], ops(
        (TRY_SEND, 0), (TRY_SEND, 0), (TRY_SEND, 0), (TRY_RECV, 0), (TRY_RECV, 0), (TRY_RECV, 0),
        (CLOSE, 0), (TRY_SEND, 0)))),
    "try-ops-capacity-1": program(5, [(1, False)], block([], ops(
        (TRY_SEND, 0), (TRY_SEND, 0), (IS_CLOSED, 0), (TRY_RECV, 0), (TRY_SEND, 0), (CLOSE, 0),
        (IS_CLOSED, 0), (TRY_RECV, 0)))),
    # Close with values buffered: recv drains, then end of stream, then a send fails.
    "close-drains-then-eof": program(6, [(3, False)], block([], ops(
        (SEND, 0), (SEND, 0), (CLOSE, 0), (RECV, 0), (RECV, 0), (RECV, 0), (SEND, 0), (TRY_SEND, 0)))),
    # Close wakes a waiting receiver and a waiting sender (on different channels).
    "close-wakes-waiters": program(7, [(0, False), (1, False)], block(
        [ops((RECV, 0), (RECV, 0)), ops((SEND, 1), (SEND, 1), (SEND, 1))],
        ops((CHECKPOINT, 0), (SLEEP0, 0), (CLOSE, 0), (CLOSE, 1)))),
    # A recv nobody can satisfy: the monitor closes the channel.
    "deadlock-ended-by-close": program(8, [(0, False)], block([], ops((RECV, 0), (RECV, 0)))),
    # Blocked tasks, ended by cancelling the root scope (then closing for the shielded one).
    "deadlock-ended-by-cancel": program(9, [(0, False), (2, False)], block(
        [ops((SEND, 0)), ops((SHIELDED, 0, ops((RECV, 1))), (RECV, 1))],
        ops((RECV, 1))), break_by_cancel=True),
    # Two faults: the first one thrown is the scope's result, the second is suppressed.
    "first-fault-wins": program(10, [(0, False)], block(
        [ops((CHECKPOINT, 0), (FAULT, 0)), ops((FAULT, 0)), ops((RECV, 0))], ops((CHECKPOINT, 0), (FAULT, 0)))),
    # A scope that cancels itself absorbs the cancellation.
    "cancel-self-absorbed": program(11, [(1, False)], block(
        [ops((RECV, 0))], ops((SCOPE, 0, block([ops((SEND, 0), (SEND, 0))], ops((CANCEL_SCOPE, 0), (CHECKPOINT, 0)))),
                               (TRY_RECV, 0)))),
    # A Task<int> body cut off by its own cancel: ScopeCancelled, caught by the parent.
    "value-scope-cancelled": program(12, [(0, False)], block([], ops(
        (SCOPE, 8, block([ops((RECV, 0))], ops((CANCEL_SCOPE, 0), (SLEEP0, 0)), value_body=True)), (TRY_SEND, 0)))),
    # Cancelling an outer scope from two levels down.
    "cancel-outer-scope": program(13, [(2, False)], block(
        [ops((SEND, 0), (SEND, 0), (SEND, 0), (SEND, 0))],
        ops((SCOPE, 0, block([ops((RECV, 0))], ops((SCOPE, 0, block([], ops((CANCEL_SCOPE, 2), (CHECKPOINT, 0)))))))))),
    # A nested scope's fault is caught and the task goes on.
    "nested-fault-caught": program(14, [(1, False)], block([], ops(
        (SCOPE, 8, block([ops((FAULT, 0))], ops((RECV, 0)))), (TRY_SEND, 0), (TRY_RECV, 0)))),
    # A child spawns siblings into its scope.
    "spawn-siblings": program(15, [(0, False)], block(
        [ops((SPAWN, 0, ops((SEND, 0), (SEND, 0))), (SPAWN, 0, ops((RECV, 0))), (RECV, 0))], ops((CHECKPOINT, 0)))),
    # Zero deadlines: with_timeout cuts a recv off (TimedOut, caught); move_on_after reports false.
    "zero-deadlines": program(16, [(0, False)], block([], ops(
        (DEADLINE, deadline_arg(True, "zero", catch=True), ops((TRY_SEND, 0), (RECV, 0))),
        (DEADLINE, deadline_arg(False, "zero"), ops((CHECKPOINT, 0))),
        (DEADLINE, deadline_arg(False, "zero"), ops((TRY_RECV, 0)))))),
    # A tiny deadline fires while the task waits (the monitor sleeps past it).
    "tiny-deadline-fires": program(17, [(0, False), (2, False)], block([ops((RECV, 1))], ops(
        (DEADLINE, deadline_arg(False, "tiny"), ops((RECV, 0))),
        (DEADLINE, deadline_arg(True, "tiny", catch=True), ops((SEND, 0))), (TRY_SEND, 1)))),
    # A long deadline that never fires; the task finishes or the monitor closes the channel.
    "long-deadline": program(18, [(1, False)], block([ops((RECV, 0))], ops(
        (DEADLINE, deadline_arg(True, "long"), ops((SEND, 0), (SEND, 0))), (RECV, 0)))),
    # Shielded work inside a cancelled scope still completes its waits.
    "shielded-in-cancelled-scope": program(19, [(0, False)], block(
        [ops((SHIELDED, 0, ops((SEND, 0), (CHECKPOINT, 0))), (CHECKPOINT, 0))],
        ops((CANCEL_SCOPE, 0), (SHIELDED, 0, ops((RECV, 0), (SLEEP0, 0))), (CHECKPOINT, 0)))),
    # A deadline inside a cancelled scope: Cancelled passes on (not TimedOut).
    "deadline-under-outer-cancel": program(20, [(0, False)], block([ops((CANCEL_SCOPE, 0))], ops(
        (DEADLINE, deadline_arg(True, "tiny"), ops((RECV, 0)))))),
    # Scope::start + awaiting the JoinHandle: a value, then a child blocked until a sibling sends.
    "start-join-value": program(22, [(0, False)], block(
        [ops((SEND, 0))], ops((START_JOIN, 0, ops((CHECKPOINT, 0))), (START_JOIN, 0, ops((RECV, 0))), (TRY_RECV, 0)))),
    # The awaited child faults: the awaiter rethrows the same fault (one fault, not two).
    "start-join-fault-delivered": program(23, [(1, False)], block(
        [ops((RECV, 0))], ops((START_JOIN, 0, ops((SLEEP0, 0), (FAULT, 0))), (SEND, 0)))),
    # The awaiter is cancelled while the child still waits.
    "start-join-awaiter-cancelled": program(24, [(0, False)], block(
        [ops((CHECKPOINT, 0), (CANCEL_SCOPE, 0))], ops((START_JOIN, 0, ops((RECV, 0))), (CHECKPOINT, 0)))),
    # A select over a ring channel and a rendezvous channel takes every value once.
    "select-ring-and-rendezvous": program(25, [(4, False), (0, False)], block(
        [ops((SEND, 0), (SEND, 0), (SEND, 0)), ops((SEND, 1), (SEND, 1))],
        ops((SELECT, 16), (SELECT, 16), (SELECT, 16), (SELECT, 16), (SELECT, 16)))),
    # A notification before the select is kept; a select cancelled while it waits takes nothing.
    "select-notify-then-cancel": program(26, [(1, False)], block(
        [ops((NOTIFY, 0), (CHECKPOINT, 0), (CANCEL_SCOPE, 0))],
        ops((SELECT, 0), (SELECT, 0), (SEND, 0)))),
    # Both receive cases on one channel, senders racing a close.
    "select-same-channel-twice": program(27, [(0, False)], block(
        [ops((SEND, 0), (SEND, 0)), ops((CHECKPOINT, 0), (CLOSE, 0))],
        ops((SELECT, 0), (SELECT, 0), (SELECT, 0)))),
    # Broadcast: two receivers, one reading as values come, one lagging behind the capacity of 3.
    "broadcast-lag": program(28, [(1, False)], block(
        [ops((BCAST_RECV, 0), (BCAST_RECV, 0), (BCAST_RECV, 0), (BCAST_RECV, 0)),
         ops((BCAST_RECV, 0), (SLEEP0, 0), (SLEEP0, 0), (BCAST_RECV, 0), (BCAST_RECV, 0))],
        ops((CHECKPOINT, 0), (BCAST_SEND, 0), (BCAST_SEND, 0), (BCAST_SEND, 0), (BCAST_SEND, 0),
            (BCAST_SEND, 0), (BCAST_SEND, 0), (CHECKPOINT, 0), (BCAST_SEND, 0)))),
    # Watch: waiters see the latest version; a cancel cuts one off.
    "watch-latest": program(29, [(1, False)], block(
        [ops((WATCH_CHANGED, 0), (WATCH_CHANGED, 0)), ops((WATCH_CHANGED, 0), (CANCEL_SCOPE, 0))],
        ops((CHECKPOINT, 0), (WATCH_SEND, 0), (WATCH_SEND, 0), (SLEEP0, 0), (WATCH_SEND, 0)))),
    # Every operation once, on four channels of different kinds.
    "every-op": program(21, [(0, False), (1, False), (4, False), (2, True)], block(
        [ops((SEND, 2), (SEND, 3), (RECV, 0), (TRY_RECV, 1), (IS_CLOSED, 2)),
         ops((SEND, 0), (TRY_SEND, 1), (RECV, 2), (RECV, 3), (CLOSE, 1))],
        ops((SLEEP0, 0), (CHECKPOINT, 0),
            (SCOPE, 8, block([ops((SEND, 2))], ops((RECV, 2), (CANCEL_SCOPE, 0)))),
            (DEADLINE, deadline_arg(False, "zero"), ops((RECV, 1))),
            (SHIELDED, 0, ops((TRY_SEND, 2))),
            (CLOSE, 0), (TRY_SEND, 0),
            (SPAWN, 0, ops((FAULT, 0)))))),
}


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "api")
    os.makedirs(out_dir, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out_dir, "seed-" + name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {out_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
