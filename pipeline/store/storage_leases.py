"""Leases: exclusive work across processes and machines (`Lease`), and its S3 kind (`s3_lease`).

On a local store a Lease is an flock (pipeline/store/store.py, Store.lease; never lost while the
process lives). Leases. flock does not exist on object storage. `lease` there is a small JSON object
`<root>/.leases/<name>.json` created with a conditional PUT (If-None-Match: *), so of two
contenders exactly one gets it; it holds the owner and its time to live, and a heartbeat thread
renews it (PUT If-Match: its ETag) every ttl/3. A holder that dies (SIGKILL) stops renewing;
once the object is older than its ttl by the server's own clock (Last-Modified against the
Date of the reply, so the machines' clocks do not matter), a contender takes it over with a PUT
If-Match the ETag it read: of two taking over, one wins. A holder whose renewal fails learns it
lost the lease (`Lease.lost`, `Lease.check()`), so it stops before committing more work.
Release deletes the object If-Match its ETag.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from pipeline.store.storage import PreconditionFailed, delete, get, put
from pipeline.store.storage_paths import ObjectPath

LEASES = ".leases"
"""The folder under an S3 store's root that holds its lease objects."""


class LeaseLost(RuntimeError):
    """This process no longer holds a lease it took (its renewal failed or was too late)."""


_NAME = re.compile(r"[^A-Za-z0-9._=-]+")


def lease_key(root: ObjectPath, name: str) -> ObjectPath:
    clean = _NAME.sub("_", name).strip(".")
    if clean != name or not clean:
        clean = f"{clean[:100]}-{hashlib.sha1(name.encode()).hexdigest()[:10]}"
    return root / LEASES / f"{clean}.json"


class Lease:
    """A held (or not held) lease; true while held. `check()` raises LeaseLost once the
    holder knows it lost it. On a local store it is an flock (never lost while the process lives)."""

    def __init__(self, name: str, held: bool, owner: str = ""):
        self.name = name
        self.held = held
        self.owner = owner
        self._lost = threading.Event()

    def __bool__(self) -> bool:
        return self.held and not self._lost.is_set()

    @property
    def lost(self) -> bool:
        return self._lost.is_set()

    def check(self) -> None:
        if self.lost:
            raise LeaseLost(
                f"lease {self.name} was lost (its renewal failed or came too late and another worker "
                "took it over); this worker stops so the other's work is not done twice"
            )


def owner_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class S3Lease(Lease):
    def __init__(self, path: ObjectPath, name: str, ttl_s: float):
        super().__init__(name, False, owner_id())
        self.path = path
        self.ttl_s = float(ttl_s)
        self.etag = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _body(self) -> bytes:
        body = {"owner": self.owner, "ttl_s": self.ttl_s, "name": self.name, "renewed": time.time()}
        return json.dumps(body).encode()

    def try_acquire(self) -> bool:
        self._renewed = time.monotonic()  # before the PUT: the server's Last-Modified is no earlier
        try:
            self.etag = put(self.path, self._body(), if_none_match=True)
        except PreconditionFailed:
            current = get(self.path)
            if current is None:
                return False  # released between our two requests: the next try may get it
            try:
                ttl = float(json.loads(current.data).get("ttl_s", self.ttl_s))
            except (ValueError, AttributeError):
                ttl = self.ttl_s  # an unreadable lease object counts with our ttl
            if current.server_now < current.last_modified + ttl + 1.0:  # Last-Modified has 1 s steps
                return False
            try:
                self.etag = put(self.path, self._body(), if_match=current.etag)  # take over the expired one
            except (PreconditionFailed, FileNotFoundError):
                return False
        self.held = True
        self._thread = threading.Thread(target=self._heartbeat, name=f"lease {self.name}", daemon=True)
        self._thread.start()
        return True

    def _heartbeat(self) -> None:
        renewed = self._renewed
        while not self._stop.wait(self.ttl_s / 3):
            attempt = time.monotonic()
            try:
                self.etag = put(self.path, self._body(), if_match=self.etag)
                renewed = attempt
            except PreconditionFailed:
                self._lost.set()
                return
            except Exception:  # a failed renewal (network): try again until the ttl is gone
                if time.monotonic() - renewed >= self.ttl_s:
                    self._lost.set()  # another worker may take it over from now on
                    return

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.held and not self.lost:
            try:
                delete(self.path, if_match=self.etag)
            except (PreconditionFailed, FileNotFoundError):
                pass
        self.held = False


@contextmanager
def s3_lease(
    root: ObjectPath,
    name: str,
    ttl_s: float,
    wait: bool = False,
    on_wait: Callable[[str], None] | None = None,
    poll_s: float = 1.0,
) -> Iterator[Lease]:
    """Take the lease `name` under root/.leases for ttl_s seconds, renewed while the block runs.

    wait=False: yield a Lease that is false at once when another holder has it. wait=True:
    poll every poll_s until it is free (on_wait gets one message first)."""
    if ttl_s <= 0:
        raise ValueError(f"lease {name}: ttl_s must be > 0, got {ttl_s}")
    lease = S3Lease(lease_key(root, name), name, ttl_s)
    told = False
    try:
        while not lease.try_acquire():
            if not wait:
                break
            if on_wait is not None and not told:
                told = True
                holder = get(lease.path)
                who = json.loads(holder.data).get("owner", "?") if holder else "?"
                on_wait(f"{name} is held by another worker ({who}); waiting for it to finish")
            time.sleep(poll_s)
        yield lease
    finally:
        lease.release()
