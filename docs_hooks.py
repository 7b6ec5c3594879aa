"""MkDocs hooks: the pages made at build time, so they cannot drift from what they describe.

- ``index.md``: the README (the repository's front page), its links turned into site links.
- ``reference/config.md``: every configuration key, from the pydantic model itself (type,
  default, limits) with the comment beside the field in ``pensive_core/config.py``.
- ``results/NAME.md``: each benchmark's results file as the benchmark wrote it.

``mkdocs build --strict`` (run by ``tests/unit/test_docs.py``) fails on a broken link.
"""

from __future__ import annotations

import inspect
import io
import re
import tokenize
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent
RESULTS = ROOT / "benchmarks" / "results"


def site_links(markdown: str) -> str:
    """README links made site links: ``docs/X.md`` -> ``X.md``, results files -> ``results/``;
    other files of the repository are named in code, not linked (they are not pages)."""
    markdown = re.sub(r"\]\(docs/([^)]+)\)", r"](\1)", markdown)
    markdown = re.sub(r"\]\(benchmarks/results/([^)]+\.md)\)", r"](results/\1)", markdown)
    return re.sub(r"\[([^\]]+)\]\((?!https?:|#|[\w./-]+\.md)([^)]+)\)", r"\1 (`\2`)", markdown)


def _comments(source: str) -> dict[int, str]:
    """Line number -> the ``#`` comment ending that line."""
    out: dict[int, str] = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out[tok.start[0]] = tok.string.lstrip("#").strip()
    return out


def _limits(field: Any) -> str:
    parts = []
    for m in field.metadata:
        for name, sign in (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<")):
            if getattr(m, name, None) is not None:
                parts.append(f"{sign} {getattr(m, name)}")
        for name in ("min_length", "max_length"):
            if getattr(m, name, None) is not None:
                parts.append(f"{name} {getattr(m, name)}")
        if getattr(m, "pattern", None) is not None:
            parts.append(f"pattern `{m.pattern}`")
    return ", ".join(parts)


def _type(annotation: Any) -> str:
    from typing import Literal, get_args, get_origin

    if get_origin(annotation) is Literal:
        return "one of " + ", ".join(f"`{a!r}`" for a in get_args(annotation))
    text = getattr(annotation, "__name__", None) or str(annotation)
    return text.replace("typing.", "")


def toml_notes() -> dict[str, str]:
    """``section.key`` -> the comment beside it in the configuration page's TOML block (the
    block a test holds equal to the defaults), continuation lines joined."""
    page = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    block = re.findall(r"```toml\n(.*?)```", page, re.S)[0]
    notes: dict[str, str] = {}
    section, last = "", None
    for line in block.splitlines():
        head = re.match(r"^\[([\w.]+)\]", line)
        if head:
            section, last = head.group(1), None
            continue
        kv = re.match(r"^(\w+)\s*=[^#]*?(?:#\s*(.*))?$", line)
        if kv:
            last = f"{section}.{kv.group(1)}" if section else kv.group(1)
            notes[last] = (kv.group(2) or "").strip()
        elif last and line.strip().startswith("#"):
            notes[last] = (notes[last] + " " + line.strip().lstrip("#").strip()).strip()
    return notes


def config_reference() -> str:
    """Every key of :class:`~pensive_core.config.PensiveConfig`, section by section."""
    from pydantic import BaseModel

    import pensive_core.config as cfg

    source = inspect.getsource(cfg)
    comments = _comments(source)
    notes = toml_notes()
    lines = [
        "# Configuration reference",
        "",
        "Generated from `pensive_core.config.PensiveConfig` when the site is built: every key, "
        "its type, default and limits, with the note beside it in the source. Set keys in "
        "`pensive.toml`, a dict passed as `config=`, or `PENSIVE_SECTION__KEY` variables "
        "(see [Configuration](../configuration.md)). Unknown keys are refused.",
        "",
    ]

    def section(model: type[BaseModel], path: str) -> None:
        src, start = inspect.getsourcelines(model)
        doc = inspect.cleandoc(model.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        doc = re.sub(r":\w+:`~?([^`]+)`", r"`\1`", doc).replace("``", "`")
        leaves = [
            n
            for n, f in model.model_fields.items()
            if not (isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel))
        ]
        if leaves:
            lines.extend([f"## `[{path}]`", "", doc, ""])
            lines.extend(["| key | type | default | limits | note |", "|---|---|---|---|---|"])
        nested = []
        for name, field in model.model_fields.items():
            ann = field.annotation
            if isinstance(ann, type) and issubclass(ann, BaseModel):
                nested.append((ann, f"{path}.{name}" if path else name))
                continue
            at = next(
                (start + i for i, s in enumerate(src) if re.match(rf"\s+{name}\s*:", s)), None
            )
            note = notes.get(f"{path}.{name}") or (comments.get(at, "") if at is not None else "")
            default = field.default
            shown = f"`{default!r}`" if not isinstance(default, str) else f'`"{default}"`'
            cells = [f"`{name}`", _type(ann), shown, _limits(field), note]
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines.append("")
        for model_, path_ in nested:
            section(model_, path_)

    section(cfg.PensiveConfig, "")
    return "\n".join(lines) + "\n"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    files.append(File.generated(config, "index.md", content=site_links(readme)))
    files.append(File.generated(config, "reference/config.md", content=config_reference()))
    index = [
        "# Results files",
        "",
        "Each benchmark's results file, as it wrote it (the JSON "
        "beside it in `benchmarks/results/` holds every figure and the commit measured).",
        "",
    ]
    for md in sorted(RESULTS.glob("*.md")):
        text = md.read_text(encoding="utf-8")
        files.append(File.generated(config, f"results/{md.name}", content=text))
        title = (text.splitlines() or [md.stem])[0].lstrip("# ").strip() or md.stem
        index.append(f"- [{title}]({md.name}) (`{md.stem}`)")
    for png in sorted(RESULTS.glob("*.png")):
        files.append(File.generated(config, f"results/{png.name}", abs_src_path=str(png)))
    files.append(File.generated(config, "results/index.md", content="\n".join(index) + "\n"))
    return files
