"""Sandboxes: an agent that reads only what it is given, writes only its workspace, reaches only its model.

Built on bubblewrap. `spec` checks what a sandbox is given, `bwrap` turns it into a command
line (pure), `homes` makes each agent's harness home, `proxy` (outside) and `forwarder`
(inside) are its only way out, and `runner` puts it together around a harness's attempts.
The author's surface is `wf.sandboxes` (agentswf.workflow.sandboxes).
"""

from typing import TYPE_CHECKING

from ..lazy import public

if TYPE_CHECKING:  # each imported when first named (agentswf/lazy.py): `spec` alone is light, `runner` is not
    from .runner import Sandbox
    from .spec import SandboxSpec

__all__ = ["Sandbox", "SandboxSpec"]

public(__name__, __file__)
