"""The approval desk: tool calls that wait for a person's decision.

A call that needs approval asks the desk and waits (within the call's time); a person
decides with `awf approve` / `awf reject`, or code does through `wf.approvals`. Every
request and decision is recorded.
"""

from __future__ import annotations

import msgspec

from ...actors import Actor, ActorRef, Reply, handler
from ..clock import wall
from ..record.lines import ApprovalDecided, ApprovalDecision, ApprovalRequest


class RequestApproval(msgspec.Struct, frozen=True):
    request: ApprovalRequest


class Decide(msgspec.Struct, frozen=True):
    call_id: str
    decision: ApprovalDecision


class ListPending(msgspec.Struct, frozen=True):
    pass


class AwaitPending(msgspec.Struct, frozen=True):
    """The calls waiting for approval, once one waits that `known` doesn't name (at once if one does).

    A watcher (a test's scripted approver, `Pending(wait_ms)`) waits on the desk rather than asking again
    on a timer, so a run on a virtual clock has no timer of a watcher's to jump to."""

    known: frozenset[str] = frozenset()


class WithdrawRequest(msgspec.Struct, frozen=True):
    """The call stopped waiting (its time ran out, or its turn ended)."""

    call_id: str


class ApprovalDesk(Actor):
    def __init__(self, recorder: ActorRef) -> None:
        super().__init__()
        self.recorder = recorder
        self.pending: dict[str, tuple[ApprovalRequest, Reply]] = {}
        self.watchers: list[Reply] = []  # AwaitPending asks answered at the next request

    @handler
    def request_approval(self, msg: RequestApproval) -> None:
        request = msgspec.structs.replace(msg.request, asked_at=wall())
        self.pending[request.call_id] = (request, self.defer())
        watchers, self.watchers = self.watchers, []
        for watcher in watchers:  # one that gave up meanwhile takes nothing
            watcher.set(self.list_pending(ListPending()))

    @handler
    def await_pending(self, msg: AwaitPending) -> list[ApprovalRequest]:
        pending = self.list_pending(ListPending())
        if any(request.call_id not in msg.known for request in pending):
            return pending
        self.watchers = [watcher for watcher in self.watchers if watcher.pending]  # those that gave up go
        self.watchers.append(self.defer())
        return []

    @handler
    async def decide(self, msg: Decide) -> bool:
        """True if a call was waiting on this decision."""
        entry = self.pending.pop(msg.call_id, None)
        if entry is None:
            return False
        request, reply = entry
        await self.recorder.ask(ApprovalDecided(request.call_id, request.tool, request.agent, msg.decision, wall()))
        reply.set(msg.decision)
        return True

    @handler
    def withdraw_request(self, msg: WithdrawRequest) -> None:
        self.pending.pop(msg.call_id, None)

    @handler
    def list_pending(self, msg: ListPending) -> list[ApprovalRequest]:
        return [request for request, _ in self.pending.values()]
