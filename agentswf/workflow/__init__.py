"""The author surface: @workflow, the Workflow context, agents and turns (each module's; the public
names are `agentswf`'s). Nothing is imported here: `awf` reads `durations` without the rest."""
