"""The docs test finds every block and reads its directive, or says what is wrong with the page."""

from __future__ import annotations

import sys

import pytest

from .blocks import PageError, blocks
from .test_docs import run_page, run_page_on

PAGE = """\
# A page

```python
x = 1
```

<!-- docs-test: skip: needs the claude CLI -->
```python
await claude()
```

1. A step:

    ```python title="review.py"
    def review():
        pass
    ```

<!-- docs-test: run, exit 3 -->
```sh
awf run review.py
```

```text
not code
```
"""


def test_every_block_is_found_with_its_directive_and_line():
    found = blocks(PAGE)
    assert [b.language for b in found] == ["python", "python", "python", "sh", "text"]
    first, skipped, titled, shell, text = found
    assert first.code == "x = 1\n" and first.line == 4
    assert skipped.skip == "needs the claude CLI"
    assert titled.title == "review.py" and titled.code == "def review():\n    pass\n"
    assert shell.run and shell.exit == 3 and shell.code == "awf run review.py\n"
    assert not text.run and text.skip is None


@pytest.mark.parametrize(
    ("page", "error"),
    [
        ("<!-- docs-test: skip -->\n```python\nx\n```\n", "must say why"),
        ("<!-- docs-test: later -->\n```python\nx\n```\n", "unknown docs-test directive"),
        ("<!-- docs-test: run -->\n```python\nx\n```\n", "only a sh block"),
        ("<!-- docs-test: run, twice -->\n```sh\nx\n```\n", "unknown option"),
        ("```python\nx = 1\n", "never closed"),
    ],
)
def test_a_page_that_is_not_well_formed_is_refused(page, error):
    with pytest.raises(PageError, match=error):
        blocks(page)


RUNS = """\
```python
import anyio, sniffio
from pathlib import Path

async def main():
    Path("seen.txt").write_text(sniffio.current_async_library() + "\\n")

anyio.run(main)
```

```python title="helper.py"
VALUE = 42
```

```python
from helper import VALUE

async def test_defined_by_the_page(tmp_path):
    with open("seen.txt", "a") as seen:
        seen.write(f"{sniffio.current_async_library()} {tmp_path.is_dir()} {VALUE}\\n")
```
"""


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_page_runs_on_the_backend_and_calls_its_tests(backend, tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(RUNS)
    where = tmp_path / "where"
    where.mkdir()
    run_page(page, backend, where, monkeypatch)
    assert (where / "seen.txt").read_text() == f"{backend}\n{backend} True 42\n"
    assert (where / "helper.py").read_text() == "VALUE = 42\n"
    assert "helper" not in sys.modules  # each page imports its own files afresh


def test_a_failing_block_fails_naming_the_page_and_line(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("Text.\n\n```python\nx = 1\nraise KeyError('b')\n```\n")
    with pytest.raises(KeyError) as caught:
        run_page(page, "asyncio", tmp_path, monkeypatch)
    frame = caught.traceback[-1]
    assert str(frame.path) == str(page) and frame.lineno + 1 == 5


def test_a_shell_block_must_exit_as_it_says(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text("<!-- docs-test: run, exit 3 -->\n```sh\nexit 4\n```\n")
    with pytest.raises(AssertionError, match="exited 4, not 3"):
        run_page(page, "asyncio", tmp_path, monkeypatch)


SHELL_ONCE = """\
```python
from pathlib import Path
Path("gone.txt").write_text("made by Python")
```

<!-- docs-test: run -->
```sh
echo ran >> "$COUNT"
rm gone.txt
mkdir -p made/deeper && echo "by sh" > made/deeper/file.txt && ln -s deeper/file.txt made/link
echo "$PWD" > where.txt
```

```python
import sniffio
assert not Path("gone.txt").exists()
assert Path("made/link").read_text() == "by sh\\n" and Path("made/link").is_symlink()
assert Path("where.txt").read_text() == f"{Path.cwd()}\\n"


async def test_after_the_shell(tmp_path):
    with open("seen.txt", "a") as seen:
        seen.write(sniffio.current_async_library())
```
"""


def test_a_page_of_python_and_shell_runs_its_shell_once_and_each_backend_sees_what_it_did(tmp_path, monkeypatch):
    page = tmp_path / "page.md"
    page.write_text(SHELL_ONCE)
    count = tmp_path / "count"
    monkeypatch.setenv("COUNT", str(count))
    run = tmp_path / "run"
    run.mkdir()
    run_page_on(page, ("asyncio", "trio"), run, monkeypatch)
    assert count.read_text() == "ran\n"  # once, on asyncio
    assert (run / "page-asyncio" / "seen.txt").read_text() == "asyncio"
    assert (run / "page" / "seen.txt").read_text() == "trio"  # ran again after the block's effects, in the same place
