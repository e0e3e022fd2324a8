"""agentswf on Temporal (`pip install agentswf[temporal]`): a workflow's code runs as Temporal
workflow code, each agent's turn as a heartbeating activity on a worker (docs/guide/temporal.md).

    engine = TemporalEngine(address="127.0.0.1:7233", task_queue="agents")
    result = await agentswf.run(definition, engine=engine)
    async with turn_worker(client, "agents"):   # what `awf worker` runs
        ...

`messages` and `devserver` import no temporalio: `awf` reads a Temporal run's files without
the extra; the rest is imported when first named.
"""

from typing import TYPE_CHECKING, Any

from .devserver import DevServer

if TYPE_CHECKING:
    from .engine import TemporalEngine, connect, on_asyncio, turn_worker, workflow_queue

__all__ = ["DevServer", "TemporalEngine", "connect", "on_asyncio", "turn_worker", "workflow_queue"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
