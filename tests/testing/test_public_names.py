"""Every type a public call returns or raises has a public name, and the examples use only those."""

from __future__ import annotations

import ast
import pydoc
from pathlib import Path

import agentswf
import agentswf.testing

ROOT = Path(__file__).resolve().parents[2]
PUBLIC_MODULES = {"agentswf", "agentswf.policy", "agentswf.testing", "agentswf.testing.models"}


def test_the_types_a_workflow_meets_are_exported():
    for name in [
        "Agent", "Agents", "Approvals", "ApprovalRequest", "Mail", "MessageRefused", "Participant",
        "Participants", "Route", "Turn", "TurnNotAnswered", "Answered", "Outcome", "RunResult", "Workflow", "load_workflow",
    ]:  # fmt: skip
        assert name in agentswf.__all__ and hasattr(agentswf, name), name
    for name in ["TestScriptError", "Response", "Record", "RunRecord", "ParticipantScript", "respond", "read_record"]:
        assert name in agentswf.testing.__all__ and hasattr(agentswf.testing, name), name
    assert all(hasattr(agentswf, name) for name in agentswf.__all__)
    assert (Path(agentswf.__file__).parent / "py.typed").exists()


def test_help_lists_the_workflows_attributes():
    text = pydoc.render_doc(agentswf.Workflow, renderer=pydoc.plaintext)
    for attribute in ["agents", "participants", "approvals", "run_id", "run_dir", "cwd"]:
        assert f"{attribute}: " in text, attribute


def test_the_examples_import_only_public_names():
    for path in sorted((ROOT / "examples").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("agentswf"):
                assert node.module in PUBLIC_MODULES, f"{path.relative_to(ROOT)} imports {node.module}"
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith("agentswf"):
                        assert alias.name in PUBLIC_MODULES, f"{path.relative_to(ROOT)} imports {alias.name}"
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "agentswf":
                assert node.attr in agentswf.__all__, f"{path.relative_to(ROOT)} uses agentswf.{node.attr}"
