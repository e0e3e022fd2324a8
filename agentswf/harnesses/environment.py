"""What an agent's processes start with of the environment: all of it but the variables that
hold a deployment's secrets (the Temporal run key, agentswf.temporal.keys; its payload keys,
agentswf.temporal.codec).

Here, below both `workflow` (a local run starts its agents with it) and `temporal` (a turn
worker does), so neither imports the other for it.
"""

from __future__ import annotations

from collections.abc import Mapping

KEY_VARIABLE = "AGENTSWF_TEMPORAL_KEY"
KEY_FILE_VARIABLE = "AGENTSWF_TEMPORAL_KEY_FILE"
KEY_VARIABLES = (KEY_VARIABLE, KEY_FILE_VARIABLE)
PAYLOAD_KEY_VARIABLE = "AGENTSWF_PAYLOAD_KEY"
PAYLOAD_OLD_KEYS_VARIABLE = "AGENTSWF_PAYLOAD_OLD_KEYS"
PAYLOAD_VARIABLES = (PAYLOAD_KEY_VARIABLE, PAYLOAD_OLD_KEYS_VARIABLE)
SECRET_VARIABLES = (*KEY_VARIABLES, *PAYLOAD_VARIABLES)  # never in an agent's environment


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the keys' variables: what an agent's processes may start with."""
    return {name: value for name, value in env.items() if name not in SECRET_VARIABLES}
