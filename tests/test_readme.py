"""Every snippet of the README runs as printed (issue 12): each ```python block is executed and each
```bash block is run by bash with the project's dpkit first on the PATH, from the repository root.

``make`` lines are left out (they would run this test suite inside itself); snippets write their ledgers
and plots under /tmp/readme-*, which are removed first so that every run starts from a fresh budget.
Blocks fenced as ```shell or ```py show administration that needs infrastructure (a PostgreSQL server,
a Spark cluster); they are not run here, and ``tests/ledger`` and ``tests/query`` test what they do.
"""

from __future__ import annotations

import glob
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
BLOCKS = [(lang, body) for lang, body in re.findall(r"```(python|bash)\n(.*?)```", README, re.S)]


def _fresh() -> None:
    for path in glob.glob("/tmp/readme-*"):
        os.remove(path)


def test_the_readme_has_snippets() -> None:
    assert sum(lang == "python" for lang, _ in BLOCKS) >= 2 and sum(lang == "bash" for lang, _ in BLOCKS) >= 2


@pytest.mark.filterwarnings("ignore::ResourceWarning")
@pytest.mark.parametrize(("lang", "body"), BLOCKS, ids=[f"{i:02d}-{lang}" for i, (lang, _) in enumerate(BLOCKS)])
def test_every_snippet_runs_as_printed(lang: str, body: str) -> None:
    _fresh()
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
               MPLBACKEND="Agg")
    if lang == "python":
        cmd = [sys.executable, "-W", "error::DeprecationWarning", "-c", body]
    else:
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("make ")]
        if not any(line.strip() for line in lines):
            pytest.skip("make commands only (they run this suite)")
        cmd = ["bash", "-e", "-o", "pipefail", "-c", "\n".join(lines)]
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, (
        f"{lang} snippet failed:\n{body}\n--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
    )
