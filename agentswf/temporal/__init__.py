"""agentswf on Temporal (`pip install agentswf[temporal]`): a workflow's code runs as Temporal
workflow code, each agent's turn as a heartbeating activity on a worker (see docs/guide/temporal.md)."""
