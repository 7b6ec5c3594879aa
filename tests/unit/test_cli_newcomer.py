"""The frictions a new user met with ``pensive``: snippets cut at the file's line ends, cramped
tables, ``bench --help``, ingest exiting 0 with nothing taken in, no "did you mean", RST in the
help, ``reindex`` without ``-n``, and ``make demo`` installing the dev toolchain.

The typer app runs in this process (typer's CliRunner) with a ./pensive.toml naming the hash
embedder, as in test_cli.py; what a user sees on stderr and the exit code are checked through
a real ``python -m pensive_core.cli`` process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from pensive_core.cli import app, main
from pensive_core.cli_format import plain_help, plural, wrap_phrases
from pensive_core.errors import InputError
from pensive_core.snippets import snippet

REPO = Path(__file__).resolve().parents[2]
TOML = '[embedder]\nname = "hash"\ndim = 64\n'
QUESTION = "How do I keep the night ferry schedule from going stale?"
# as the example corpus has it: a paragraph hard-wrapped at 100 columns
SCHEDULE = (
    "# Publishing ferry schedules\n\n## Keeping it current\n\n"
    "The night ferry schedule changes with the tide tables, so it goes stale fastest. Every Monday the\n"
    "duty planner runs `harbourline sync-tides`, which pulls the week's tide predictions and shifts the\n"
    "night departures to keep at least 2.4 metres of water under the keel.\n"
)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A working folder with a pensive.toml (hash embedder) and docs/ holding one file."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", "100")  # the "terminal" of in-process runs
    (tmp_path / "pensive.toml").write_text(TOML)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "schedules.md").write_text(SCHEDULE)
    return tmp_path


def pensive(*args, code=0):
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == code, (result.output, result.exception)
    return result


def run(*args, cwd, env_extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PENSIVE_")}
    env.update({"PENSIVE_EMBEDDER__NAME": "hash", "COLUMNS": "100", "PYTHONPATH": str(REPO)})
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "pensive_core.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def snippet_cell(stdout: str) -> str:
    """The snippet column of the query table's rows, joined (it is the last column)."""
    parts = [
        line.split("│")[-2].strip()
        for line in stdout.splitlines()
        if line.startswith("│") and line.count("│") >= 5
    ]
    return " ".join(p for p in parts if p)


# -- 1. snippets -------------------------------------------------------------------------------


def test_the_query_snippet_runs_past_the_files_line_breaks_and_ends_at_a_word(home):
    pensive("ingest", "docs")
    out = pensive("query", QUESTION, "-k", "1", "--width", "100", "--snippet", "150").stdout
    cell = snippet_cell(out)
    assert cell == snippet(SCHEDULE, QUESTION, 150)  # the table shows the snippet whole
    assert cell.startswith("… The night ferry schedule changes with the tide tables")
    assert "Every Monday the duty planner runs" in cell  # the file's line end is no stop
    assert cell.endswith("…") and len(cell) <= 150
    assert cell.removesuffix("…").split()[-1] in SCHEDULE.split()  # clipped after a whole word


# -- 2. width, wrapping, plurals ------------------------------------------------------------


def test_the_query_table_fills_the_width_given_and_leaves_the_snippet_room_at_80(home):
    pensive("ingest", "docs")
    narrow = pensive("query", QUESTION, "-k", "1", "--width", "80").stdout
    assert widest(narrow) == 80
    header = next(line for line in narrow.splitlines() if "snippet" in line)
    assert len(header.split("┃")[-2]) >= 30  # the snippet column keeps about half the table
    assert "schedules.md" in narrow and "dense#1" in narrow  # doc and sources still shown
    wide = pensive("query", QUESTION, "-k", "1", "--width", "160").stdout
    assert widest(wide) == 160
    assert "┃ tier ┃" in wide and "┃ sources" in wide  # wide enough for columns of their own
    assert "1 hit · tier" in wide and "1 hits" not in wide


def test_the_width_follows_the_terminal_and_a_runs_width_does_not_outlive_it(home, monkeypatch):
    pensive("ingest", "docs")
    monkeypatch.setenv("COLUMNS", "130")  # what shutil.get_terminal_size reads first
    pensive("query", QUESTION, "-k", "1", "-w", "60")
    after = pensive("query", QUESTION, "-k", "1").stdout
    assert widest(after) == 130


def test_the_ingest_summary_breaks_between_phrases_with_singulars(home):
    out = pensive("ingest", "docs", "--width", "40").stdout
    lines = out.strip().splitlines()[-3:]
    assert lines == [
        "1 added, 0 updated, 0 unchanged;",
        "1 passage embedded, 0 reused, 0 removed",
        lines[2],
    ]
    assert lines[2].startswith("in ") and lines[2].endswith("s (1 file)")
    wide = pensive("ingest", "docs", "-n", "other", "--width", "120").stdout
    assert "1 added, 0 updated, 0 unchanged; 1 passage embedded" in wide


def test_stats_and_chat_at_narrow_widths_break_between_phrases(home):
    pensive("ingest", "docs")
    out = pensive("stats", "--width", "60").stdout
    assert widest(out) <= 60
    lines = [line.strip() for line in out.splitlines()]
    assert "hit rate n/a (no queries yet)" in lines  # whole, on a line of its own
    assert "L3 escalations (this process): 0 for exact strings," in lines
    text = "I moved to Lisbon last week and the weather there has been sunny every day since"
    pensive("chat", "add", "s1", text, "--timestamp", "2024-05-01T10:00:00")
    recall = pensive("chat", "recall", "s1", "where do I live", "--width", "80").stdout
    assert widest(recall) == 80
    row = next(line for line in recall.splitlines() if line.startswith("│ 1"))
    assert "s1 #0" in row and "2024-05-01 10:00" in row  # the time whole, not "2024-05-01T1…"
    assert len(row.split("│")[-2]) >= 24  # the text column keeps room to be read


def test_plural_and_wrap_phrases():
    assert [plural(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert plural(1, "entity", "entities") == "1 entity"
    assert plural(3, "entity", "entities") == "3 entities"
    assert wrap_phrases(["aa bb", "cc dd", "ee"], 11) == "aa bb cc dd\nee"
    assert wrap_phrases(["a very long phrase", "b"], 5) == "a very long phrase\nb"


# -- 3. bench --help ------------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_bench_help(flag, monkeypatch):
    monkeypatch.chdir(REPO)
    out = pensive("bench", flag).stdout
    assert "Usage:" in out and "Run a benchmark module" in out
    assert "no benchmark" not in out
    listed = out.split("benchmarks here:")[1].replace(",", " ").split()
    assert "scifact" in listed and "common" not in listed  # modules with a main() only


def test_an_unknown_benchmark_names_the_nearest(monkeypatch):
    monkeypatch.chdir(REPO)
    result = pensive("bench", "scifac", code=1)
    assert "did you mean 'scifact'?" in str(result.exception)


# -- 4. ingest's exit code --------------------------------------------------------------------


def test_ingest_of_no_loadable_file_fails_and_creates_no_store(home):
    (home / "pics").mkdir()
    (home / "pics" / "a.png").write_bytes(b"\x89PNG")
    (home / "pics" / "b.pdf").write_bytes(b"%PDF")
    result = pensive("ingest", "pics", code=1)
    assert isinstance(result.exception, InputError)
    assert "nothing ingested: no .txt .md" in str(result.exception)
    assert "(2 files of other kinds ignored)" in str(result.exception)
    assert not (home / "pensive-data").exists()


@pytest.mark.slow  # a real `pensive` process per command
def test_ingest_exit_codes_as_a_user_sees_them(home):
    (home / "bad").mkdir()
    (home / "bad" / "empty.txt").write_text("  \n")
    (home / "bad" / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    out = run("ingest", "bad", cwd=home)
    assert out.returncode == 1, out.stderr
    assert "skipped bad/empty.txt: file has no text" in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert (
        last
        == "error: nothing ingested: 2 files read, every one skipped (1 empty, 1 not UTF-8 text)"
    )
    out = run("ingest", "docs", "bad", cwd=home)  # anything taken in: success, skips listed
    assert out.returncode == 0, out.stderr
    assert "1 added" in out.stdout and "skipped bad/empty.txt" in out.stderr
    out = run("ingest", "docs", cwd=home)  # the same file again: unchanged is a success
    assert out.returncode == 0, out.stderr
    assert "0 added, 0 updated, 1 unchanged" in out.stdout


def test_ingest_help_says_when_it_fails():
    text = " ".join(pensive("ingest", "--help").stdout.split())
    assert "Exit code 0 when anything was taken in" in text
    assert "Exit code 1 when nothing was" in text


# -- 5. did you mean ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "args,said",
    [
        (["qury", "x"], "Did you mean 'query'?"),
        (["chat", "lst"], "Did you mean 'list'?"),
        (["query", "x", "--namspace", "a"], "--namespace"),
    ],
)
def test_a_mistyped_command_or_option_gets_a_suggestion(args, said, capsys):
    with pytest.raises(SystemExit) as stop:
        main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


@pytest.mark.slow  # a real `pensive` process per command
def test_a_mistyped_config_key_gets_a_suggestion(home):
    out = run("stats", cwd=home, env_extra={"PENSIVE_FUSION__METHD": "rrf"})
    assert out.returncode == 1
    assert "unknown config key 'fusion.methd' (did you mean 'fusion.method'?)" in out.stderr


# -- 6. help without RST -----------------------------------------------------------------------


def commands(group, prefix: tuple[str, ...] = ()):
    """Every (path, command) under a group (typer's own copy of click: matched by shape)."""
    for name, cmd in group.commands.items():
        yield (*prefix, name), cmd
        if hasattr(cmd, "commands"):
            yield from commands(cmd, (*prefix, name))


def test_help_texts_show_no_rst_markup():
    group = typer.main.get_command(app)
    docs = [app.registered_commands[i].callback.__doc__ or "" for i in range(3)]
    assert any("``" in d for d in docs)  # the docstrings do have it: the cleaning is tested
    for path, cmd in commands(group):
        texts = [cmd.help or "", *(getattr(p, "help", None) or "" for p in cmd.params)]
        for text in texts:
            assert "``" not in text and ":class:" not in text and ":meth:" not in text, path
        shown = pensive(*path, "--help").stdout
        assert "``" not in shown and ":class:" not in shown, path
    query_help = group.commands["query"].help or ""
    assert "POST /v1/query; --json prints" in query_help  # a paragraph is one line


def test_plain_help():
    text = "Use ``x`` or :class:`~pensive_core.types.Hit` and :meth:`Pensive.query`.\nNext line.\n\n- a\n- b"
    assert plain_help(text) == "Use x or Hit and Pensive.query. Next line.\n\n- a\n- b"
    assert plain_help(None) is None


# -- 7. -n for --namespace ---------------------------------------------------------------------


def test_every_namespace_option_has_n_and_no_short_option_clashes():
    group = typer.main.get_command(app)
    seen = 0
    for path, cmd in commands(group):
        names = [
            o for p in cmd.params for o in getattr(p, "opts", []) + getattr(p, "secondary_opts", [])
        ]
        assert len(names) == len(set(names)), (path, names)
        for p in cmd.params:
            if "--namespace" in getattr(p, "opts", []):
                assert "-n" in p.opts, path
                seen += 1
    assert seen >= 15
    reindex = group.commands["reindex"]
    ctx = reindex.make_context("reindex", ["--to", "memory", "-n", "tenant-1"])
    assert ctx.params["namespace"] == "tenant-1"


# -- 8. make demo ------------------------------------------------------------------------------


@pytest.mark.skipif(shutil.which("make") is None, reason="needs GNU make")
def test_make_demo_installs_only_what_the_demo_runs(tmp_path):
    shutil.copy(REPO / "Makefile", tmp_path)
    shutil.copy(REPO / "pyproject.toml", tmp_path)

    def plan(target):
        out = subprocess.run(
            ["make", "-n", target], cwd=tmp_path, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        return out.stdout

    demo = plan("demo")
    assert '-e ".[faiss,minilm]"' in demo and ".[dev]" not in demo and "chromium" not in demo
    assert demo.index('install --quiet "torch==') < demo.index(".[faiss,minilm]")  # CPU torch first
    assert "pensive ingest examples/docs" in demo
    test = plan("test")
    assert '-e ".[dev]"' in test and "chromium" in test and "pytest tests" in test
    # after the full setup (both stamps newer than pyproject.toml) the demo installs nothing
    venv = tmp_path / ".venv"
    venv.mkdir()
    t = (tmp_path / "pyproject.toml").stat().st_mtime + 10
    for stamp in (".pensive-setup", ".pensive-demo-setup"):
        (venv / stamp).touch()
        os.utime(venv / stamp, (t, t))
    assert "pip install" not in plan("demo")
    # after the demo's setup alone, make test still installs the whole toolchain
    (venv / ".pensive-setup").unlink()
    assert '-e ".[dev]"' in plan("test")


def test_the_snippet_of_every_hit_is_one_line_in_json_too(home):
    """--json is untouched: every hit's text whole, line breaks and all."""
    pensive("ingest", "docs")
    hit = json.loads(pensive("query", QUESTION, "-k", "1", "--json").stdout)["hits"][0]
    assert "Every Monday the\nduty planner" in hit["text"]
