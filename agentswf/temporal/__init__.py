"""agentswf on Temporal (`pip install agentswf[temporal]`): a workflow's code runs as Temporal
workflow code, each agent's turn as a heartbeating activity on a worker (docs/guide/temporal.md).

    engine = TemporalEngine(address="127.0.0.1:7233", task_queue="agents")
    result = await agentswf.run(definition, engine=engine)
    async with turn_worker(client, "agents", key=load_key()):   # what `awf worker` runs
        ...

Every process of a deployment holds one run key (`RunKey`, `load_key`: keys.py), which
seals what the workflow takes and what its workers run, and may hold a payload key
(`PayloadKeys`: codec.py), which encrypts what it puts in the workflow's history; `connect`
makes a client with it.

`messages`, `keys` and `devserver` import no temporalio: `awf` reads a Temporal run's files without
the extra. Every public name is imported when first named.
"""

from typing import TYPE_CHECKING

from ..lazy import public

if TYPE_CHECKING:  # each imported when first named (agentswf/lazy.py)
    from .devserver import DevServer
    from .engine import PayloadKeys, TemporalEngine, connect, on_asyncio, turn_worker, workflow_queue
    from .keys import RunKey, load_key

__all__ = [
    "DevServer", "PayloadKeys", "RunKey", "TemporalEngine", "connect", "load_key", "on_asyncio", "turn_worker",
    "workflow_queue",
]

public(__name__, __file__)
