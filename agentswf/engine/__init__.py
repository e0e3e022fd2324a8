"""The actors of one run: the run, each agent's turns, the tool broker, the switchboard, approvals, the recorder."""
