"""A session CLI under its keeper (`open_in_group`): its standard input held open for a
conversation of lines, and, however the block ends, nothing of it left running."""

from __future__ import annotations

import os
from pathlib import Path

import anyio
import pytest

from agentswf.harnesses.process import ChannelClosed, open_in_group

from .kit import alive

pytestmark = pytest.mark.anyio

# Answers each line it reads, after starting two children that would outlive it: one escaping
# the group (setsid, deaf to SIGTERM), one plain.
ECHO = """
setsid sh -c 'trap "" TERM HUP; echo $$ >>"$PIDS"; exec sleep 1000' </dev/null >/dev/null 2>&1 &
sleep 1000 & echo $! >>"$PIDS"
echo $$ >>"$PIDS"
while read -r line; do echo "got $line"; done
echo "input ended"
"""


async def pids_in(path: Path) -> list[int]:
    with anyio.fail_after(10):
        while not path.exists() or len(path.read_text().split()) < 3:
            await anyio.sleep(0.01)
    return [int(pid) for pid in path.read_text().split()]


def env_for(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PIDS": str(tmp_path / "pids")}


async def test_a_conversation_of_lines_then_the_cli_ends_with_its_input_and_its_tree_with_it(tmp_path):
    async with open_in_group(["/bin/sh", "-c", ECHO], cwd=tmp_path, env=env_for(tmp_path)) as channel:
        started = await pids_in(tmp_path / "pids")
        await channel.send(b"one\n")
        assert await channel.receive() == b"got one"
        await channel.send(b"two\n")  # the input is still open: a second request gets its answer
        assert await channel.receive() == b"got two"
        await channel.close_input()
        assert await channel.receive() == b"input ended"
        with pytest.raises(ChannelClosed):
            await channel.receive()
    assert [pid for pid in started if alive(pid)] == []


async def test_cancelled_mid_conversation_nothing_of_it_is_left(tmp_path):
    with anyio.move_on_after(1):
        async with open_in_group(["/bin/sh", "-c", ECHO], cwd=tmp_path, env=env_for(tmp_path)) as channel:
            started = await pids_in(tmp_path / "pids")
            await channel.send(b"one\n")
            assert await channel.receive() == b"got one"
            await anyio.sleep(30)  # cancelled here, the CLI waiting on its open input
    assert [pid for pid in started if alive(pid)] == []


async def test_a_cli_that_ignores_the_end_of_its_input_is_stopped_when_the_block_ends(tmp_path):
    deaf = 'echo $$ >>"$PIDS"; echo $$ >>"$PIDS"; echo $$ >>"$PIDS"; exec sleep 1000 <&-'
    with anyio.fail_after(10):
        async with open_in_group(["/bin/sh", "-c", deaf], cwd=tmp_path, env=env_for(tmp_path)):
            await pids_in(tmp_path / "pids")
    assert not alive((await pids_in(tmp_path / "pids"))[0])


async def test_writing_to_a_cli_that_is_gone_says_so(tmp_path):
    async with open_in_group(["/bin/sh", "-c", "exit 0"], cwd=tmp_path, env=dict(os.environ)) as channel:
        with pytest.raises(ChannelClosed):
            await channel.receive()
        with pytest.raises(ChannelClosed):
            for _ in range(100):  # the pipe's buffer may take the first writes
                await channel.send(b"x" * 65536)


async def test_an_error_in_the_block_is_raised_as_it_is_and_nothing_is_left(tmp_path):
    with pytest.raises(LookupError, match="the client's own"):
        async with open_in_group(["/bin/sh", "-c", ECHO], cwd=tmp_path, env=env_for(tmp_path)):
            started = await pids_in(tmp_path / "pids")
            raise LookupError("the client's own")  # not wrapped in the pipes' exception group
    assert [pid for pid in started if alive(pid)] == []
