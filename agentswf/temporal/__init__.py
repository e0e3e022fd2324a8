"""agentswf on Temporal (`pip install agentswf[temporal]`): a workflow's code runs as Temporal
workflow code, each agent's turn as a heartbeating activity on a worker (docs/guide/temporal.md).

    engine = TemporalEngine(address="127.0.0.1:7233", task_queue="agents")
    result = await agentswf.run(definition, engine=engine)
    async with turn_worker(client, "agents"):   # what `awf worker` runs
        ...
"""

from .devserver import DevServer
from .engine import TemporalEngine, connect, on_asyncio, turn_worker, workflow_queue

__all__ = ["DevServer", "TemporalEngine", "connect", "on_asyncio", "turn_worker", "workflow_queue"]
