"""Mail between agents: the words they exchange, the rules of sending and replying, the Switchboard and each route."""
