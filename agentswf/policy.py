"""Tool-call policies for `@workflow(..., policies=[...])`: each sees a call and decides.

    from agentswf.policy import deny, redact, require_approval

    def guard(call):
        if call.tool == "issue_refund" and call.input["amount"] > 100:
            return require_approval("refunds over 100 need a person")
        return redact("card_number")

Deny always wins; approval makes the call wait for `awf approve` / `awf reject` (or
`wf.approvals`); redacted fields never reach the record, logs or traces.
"""

from .engine.tools.policy import Decision, PolicyCall, allow, deny, log, redact, require_approval

__all__ = ["Decision", "PolicyCall", "allow", "deny", "log", "redact", "require_approval"]
