"""Every results file names the commit it measured: ``write_results`` adds it to a payload
that does not carry one (and says so on its page), and leaves one that does alone."""

import json
import re

import pytest

from benchmarks.common import write_results


def test_a_result_without_a_commit_gets_one(tmp_path):
    write_results("x", tmp_path, {"figure": 1}, "# X\n")
    payload = json.loads((tmp_path / "x.json").read_text())
    commit = payload["source"]["commit"]  # None outside a git checkout
    assert commit is None or re.fullmatch(r"[0-9a-f]{40}", commit)
    assert f"Measured on commit {commit or 'unknown'}" in (tmp_path / "x.md").read_text()


def test_a_result_with_its_commit_is_left_alone(tmp_path):
    write_results("y", tmp_path, {"figure": 1, "commit": "ab" * 20}, "# Y\n")
    assert "source" not in json.loads((tmp_path / "y.json").read_text())
    assert (tmp_path / "y.md").read_text() == "# Y\n"


@pytest.mark.parametrize("name", ["", "..", "../x", "a/b", "/tmp/x"])
def test_a_name_that_leaves_the_results_folder_is_refused(tmp_path, name):
    out = tmp_path / "out"
    with pytest.raises(ValueError, match="file name"):
        write_results(name, out, {"figure": 1}, "# X\n")
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the folder
