"""Agents played from a run's record, below the workflow layer so a run can fork from a record.

`recorded` reads a record back as hostile input; `played` plays agents from it (`ReplayBook`,
`ReplayHarness`, `ReplayDiverged`); `fork` plays what came before one agent's turn and hands the
rest to the real harnesses; `wfa` is the agent's side of `wfa` they speak, in the event loop.
`agentswf.testing.replay` and `agentswf.testing.fork` are their testing API, and
`agentswf.run(continue_from=ContinueFrom(...))` forks a run (agentswf/workflow/forking.py).
"""
