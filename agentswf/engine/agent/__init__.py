"""An agent of the run: its actor (the shell around the turn), the messages it takes, what it runs beside its handlers (its CLI's attempts and timers) and what it writes for its agent."""
