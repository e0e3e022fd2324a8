"""The actor kernel: actors with private state and bounded mailboxes, under supervisors.

It knows nothing of agents. Messages are msgspec Structs dispatched by type; asks are
answered through a one-shot slot, and a handler raising fails only that ask; crashes
(a tell's handler or a background task raising) follow structured concurrency unless a
child opts into a restart policy; messages no handler will see become dead letters; every
mailbox event of an actor system can be traced, per supervisor (`tracing`).
"""

from typing import TYPE_CHECKING

from ..lazy import public

if TYPE_CHECKING:  # each imported when first named (agentswf/lazy.py)
    from .actor import Actor, handler, in_askers_task, write_through
    from .cell import Restart
    from .mailbox import DeadLetter, Mailbox, MailboxStatistics, Overflow
    from .ref import ActorRef
    from .reply import Reply
    from .supervisor import DEAD_LETTERS_KEPT, Supervisor, SupervisorStatistics
    from .tracing import Tracer, capture_trace

__all__ = [
    "DEAD_LETTERS_KEPT",
    "Actor",
    "ActorRef",
    "DeadLetter",
    "Mailbox",
    "MailboxStatistics",
    "Overflow",
    "Reply",
    "Restart",
    "Supervisor",
    "SupervisorStatistics",
    "Tracer",
    "capture_trace",
    "handler",
    "in_askers_task",
    "write_through",
]

public(__name__, __file__)
