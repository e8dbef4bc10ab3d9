"""Every Python example of docs/testing.md runs, top to bottom in one namespace, as a reader
would paste them: the page cannot drift from the harness."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).resolve().parents[2] / "docs" / "testing.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.DOTALL)


def test_the_examples_of_the_testing_page_run():
    blocks = examples()
    assert len(blocks) >= 4
    namespace: dict = {"__name__": "docs_testing"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"docs/testing.md example {number}", "exec")
        exec(code, namespace)
