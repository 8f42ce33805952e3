"""A kazoo client driven by zk-recipes' kazoo interop tests (tests/kazoo/interop.rs, through
tests/common/kazoo.rs).

Usage: python3 kazoo_peer.py <connect string> <session timeout in seconds>

Prints `ready` once connected, then answers each line read from stdin with one line:

    lease <path> <duration_s> <identifier> [<now_epoch_s>]          -> granted | refused
    multi-lease <count> <path> <duration_s> <identifier> [<now_epoch_s>] -> granted | refused
    partition-join <path> <identifier> <time_boundary_s> <max_reaction_s> <item>...  -> joined
    partition-state                      -> state <allocating|acquired|release|failure> <item>...
    partition-finish                     -> finished
    quit                                 -> bye (the session is closed, the process exits)

`now_epoch_s` is the lease's clock (kazoo's `utcnow` argument); without it kazoo reads its own.
A peer has at most one partitioner; a thread of its own calls `release_set()` whenever it is
in RELEASE, as a member's worker would. A command that raises answers `error <exception>`.
End of stdin is `quit`.
"""

import datetime
import sys
import threading

from kazoo.client import KazooClient
from kazoo.recipe.lease import MultiNonBlockingLease, NonBlockingLease


def clock(args):
    """kazoo's `utcnow` argument: a fixed time if one is given, else kazoo's default."""
    if not args:
        return {}
    now = datetime.datetime.fromtimestamp(float(args[0]), datetime.timezone.utc).replace(tzinfo=None)
    return {"utcnow": lambda: now}


def drive(partitioner, changed):
    """Release the set whenever the partitioner asks, until it fails."""
    while True:
        changed.clear()
        if partitioner.failed:
            return
        if partitioner.release:
            partitioner.release_set()
            continue
        changed.wait()


def main():
    connect, session_s = sys.argv[1], float(sys.argv[2])
    zk = KazooClient(hosts=connect, timeout=session_s)
    zk.start(timeout=60)
    partitioner = None
    print("ready", flush=True)
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        verb, args = words[0], words[1:]
        try:
            if verb == "lease":
                path, duration, identifier = args[0], float(args[1]), args[2]
                lease = NonBlockingLease(
                    zk, path, datetime.timedelta(seconds=duration), identifier, **clock(args[3:])
                )
                reply = "granted" if lease else "refused"
            elif verb == "multi-lease":
                count, path, duration, identifier = int(args[0]), args[1], float(args[2]), args[3]
                lease = MultiNonBlockingLease(
                    zk, count, path, datetime.timedelta(seconds=duration), identifier, **clock(args[4:])
                )
                reply = "granted" if lease else "refused"
            elif verb == "partition-join":
                path, identifier, boundary, reaction, items = args[0], args[1], float(args[2]), float(args[3]), args[4:]
                changed = threading.Event()
                partitioner = zk.SetPartitioner(
                    path,
                    items,
                    identifier=identifier,
                    time_boundary=boundary,
                    max_reaction_time=reaction,
                    state_change_event=changed,
                )
                threading.Thread(target=drive, args=(partitioner, changed), daemon=True).start()
                reply = "joined"
            elif verb == "partition-state":
                reply = " ".join(["state", partitioner.state.lower()] + [str(item) for item in partitioner])
            elif verb == "partition-finish":
                partitioner.finish()
                reply = "finished"
            elif verb == "quit":
                break
            else:
                reply = "error unknown command " + verb
        except Exception as e:  # reported to the test, which fails with it
            reply = "error %s: %s" % (type(e).__name__, e)
        print(reply, flush=True)
    zk.stop()
    zk.close()
    print("bye", flush=True)


if __name__ == "__main__":
    main()
