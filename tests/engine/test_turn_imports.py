"""The turn machine imports no I/O: following its imports from the source (`ast`, so an import in
a function counts too), nothing reaches an actor, the Switchboard, the Recorder, an event loop,
a socket or a thread."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "agentswf"
TURN = PACKAGE / "engine" / "turn"
FORBIDDEN = ("anyio", "trio", "asyncio", "socket", "threading", "agentswf.actors", "agentswf.engine.mail.switchboard", "agentswf.engine.record.recorder")


def _source(module: str) -> Path | None:
    path = PACKAGE.parent.joinpath(*module.split("."))
    for candidate in (path / "__init__.py", path.with_suffix(".py")):
        if candidate.exists():
            return candidate
    return None


def _imports(module: str) -> set[str]:
    """The modules `module` imports: `from x import y` is `x.y` where that is a module, else `x`."""
    path = _source(module)
    assert path is not None
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source = ".".join(part for part in (base, node.module or "") if part)
            found.update(f"{source}.{alias.name}" if _source(f"{source}.{alias.name}") else source for alias in node.names)
    return found


def test_the_turn_machine_reaches_no_actor_loop_socket_or_thread():
    reached: dict[str, str] = {}  # module -> the module that imports it
    todo = ["agentswf.engine.turn", *(f"agentswf.engine.turn.{path.stem}" for path in sorted(TURN.glob("*.py")))]
    while todo:
        module = todo.pop()
        for name in _imports(module):
            if name not in reached:
                reached[name] = module
                if name.startswith("agentswf.") and _source(name) is not None:
                    todo.append(name)
    bad = {name: by for name, by in reached.items() if name.startswith(FORBIDDEN)}
    assert not bad, f"the turn reaches I/O: {bad}"
    assert "agentswf.engine.mail.words" in reached  # the walk followed the turn's imports
