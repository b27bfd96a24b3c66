"""The API process's lanes for CPU work off the event loop, shared fairly between tenants.

Two sets of FIRE_CPU_THREADS lanes each: one parses uploads and splits batch files (seconds to minutes of work),
the other scores request bodies (a few milliseconds to a second), so that no scoring request waits behind an
upload. Within each, with more than one tenant (API keys), a tenant holds at most all lanes but one: a tenant's two
big uploads leave the other lane to whoever comes next. A freed lane goes to the tenants that wait in turn (the
tenant served longest ago first), each tenant's requests in the order they came.
"""

import asyncio
from collections import deque
from collections.abc import Callable
from typing import TypeVar

import anyio

T = TypeVar("T")


class FairLanes:
    """``lanes`` threads of CPU work, at most ``per_tenant`` of them a tenant's at once, freed lanes given to the
    waiting tenants in turn. Only the event loop's thread calls it (no lock)."""

    def __init__(self, lanes: int, per_tenant: int):
        self.lanes = lanes
        self.per_tenant = per_tenant
        self.held: dict[str, int] = {}
        self.waiting: dict[str, deque[asyncio.Future]] = {}  # in turn: the tenant served longest ago first
        self.threads = anyio.CapacityLimiter(lanes)

    async def run(self, tenant: str, function: Callable[..., T], *args) -> T:
        await self._acquire(tenant)
        try:
            return await anyio.to_thread.run_sync(function, *args, limiter=self.threads)
        finally:
            self._release(tenant)

    def _may_take(self, tenant: str) -> bool:
        return sum(self.held.values()) < self.lanes and self.held.get(tenant, 0) < self.per_tenant

    async def _acquire(self, tenant: str) -> None:
        if tenant not in self.waiting and self._may_take(tenant):
            self.held[tenant] = self.held.get(tenant, 0) + 1
            return
        granted = asyncio.get_running_loop().create_future()
        self.waiting.setdefault(tenant, deque()).append(granted)
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():
                self._release(tenant)  # the lane came as the request was dropped: pass it on
            else:
                self._forget(tenant, granted)
            raise

    def _release(self, tenant: str) -> None:
        self.held[tenant] -= 1
        if not self.held[tenant]:
            del self.held[tenant]
        self._grant()

    def _grant(self) -> None:
        """Give free lanes to the waiting tenants in turn, each served tenant moved to the end of the turn."""
        while True:
            tenant = next((name for name in self.waiting if self._may_take(name)), None)
            if tenant is None:
                return
            queue = self.waiting.pop(tenant)
            granted = queue.popleft()
            if queue:
                self.waiting[tenant] = queue  # (re-inserted: last in the turn)
            if granted.cancelled():
                continue
            self.held[tenant] = self.held.get(tenant, 0) + 1
            granted.set_result(None)

    def _forget(self, tenant: str, granted: asyncio.Future) -> None:
        queue = self.waiting.get(tenant)
        if queue is not None and granted in queue:
            queue.remove(granted)
            if not queue:
                del self.waiting[tenant]


class CpuLanes:
    """The process's two sets of lanes: ``parsing`` (uploads, batch files) and ``scoring`` (scoring bodies)."""

    def __init__(self, threads: int, *, tenants: bool):
        per_tenant = max(1, threads - 1) if tenants else threads  # with one tenant there is no one to leave a lane to
        self.parsing = FairLanes(threads, per_tenant)
        self.scoring = FairLanes(threads, per_tenant)


class CpuLane:
    """The lanes as one request's tenant uses them."""

    def __init__(self, lanes: CpuLanes, tenant: str):
        self.lanes = lanes
        self.tenant = tenant

    async def run(self, function: Callable[..., T], *args) -> T:
        """Parse an upload or split a file (the parsing lanes)."""
        return await self.lanes.parsing.run(self.tenant, function, *args)

    async def score(self, function: Callable[..., T], *args) -> T:
        """Score a request's body (the scoring lanes)."""
        return await self.lanes.scoring.run(self.tenant, function, *args)
