"""Every notebook's code cells run top to bottom, as written (bundled model included)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, tmp_path, monkeypatch):
    cells = json.loads(path.read_text())["cells"]
    code = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    assert code, "notebook has no code"
    monkeypatch.chdir(path.parent.parent)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    namespace: dict = {}
    for i, src in enumerate(code):
        exec(compile(src, f"{path.name}[cell {i}]", "exec"), namespace)  # noqa: S102
