"""Docs check: every relative link of README.md and docs/*.md resolves, and the course map
(docs/concepts.md, docs/concepts.ko.md) points at things that exist (fast, no network).

1. A relative link (``[text](target)``, ``![alt](target)``, ``<a href>``, ``<img src>``,
   outside code) names a file or folder of the repository (not outside it: a link that leaves
   the repository is broken on GitHub).
2. A ``#heading`` anchor on a markdown file (or alone: the same file) matches one of its
   headings by GitHub's slug rules (lowercase; punctuation removed, letters of any script
   such as Hangul kept; each space a ``-``; a repeated slug gets ``-1``, ``-2``, ...) or an
   ``<a id=...>`` / ``<a name=...>`` of that file.
3. A ``#L123`` (or ``#L123-L130``) anchor on a source file is inside the file, and that line
   defines the symbol the link names in backticks (``def X``, ``class X``, ``X =``,
   ``X: ...``, ``self.X =``, a YAML ``X:``), so a line link cannot drift silently when the
   code above it changes; the failure says where the symbol is now
   (``python tools/line_links.py --fix`` moves the links).
4. The course map's commands parse with attnkit's own parser, their recipes exist and their
   ``--set`` keys are keys of those recipes' config (``attnkit.tasks.run_config.load_config``
   validates them as ``attnkit train`` does); its explorer anchors are the agreed section
   ids, each an ``id`` of the explorer's page; the lab sections it names (``§2``) are
   sections of those notebooks.
5. Where a learner is pointed: the READMEs' first screen names the explorer, the labs and the
   course map; the end of the demo names the explorer command for the run it trained.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
from line_links import check_link, fix_page  # noqa: E402

PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
COURSE_MAPS = (ROOT / "docs" / "concepts.md", ROOT / "docs" / "concepts.ko.md")
# the explorer's section ids that the docs may name (agreed for every part of the explorer)
EXPLORER_ANCHORS = {
    "tour",
    "input",
    "embed",
    "head",
    "padding",
    "soft-hard",
    "score-functions",
    "heads",
    "residual",
    "ffn",
    "add-norm",
    "family",
    "teacher-forcing",
    "nsp",
}
LABS = (
    "lab000_transformer_for_nlp.ipynb",
    "lab001_transformer_anatomy.ipynb",
    "lab002_seq2seq_attention.ipynb",
    "lab003_elmo_gpt_bert.ipynb",
    "lab004_attention_nyu.ipynb",
)
FIRST_SCREEN = 40  # lines

FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")
INLINE_LINK = re.compile(
    r"!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^()\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)"
)
REFERENCE = re.compile(r"^\s{0,3}\[([^\]]+)\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_LINK = re.compile(r"<(?:a|img)\b[^>]*?\b(?:href|src)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)\s*=\s*[\"']([^\"']+)[\"']", re.I)
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
LINE_ANCHOR = re.compile(r"^L(\d+)(?:-L(\d+))?$")
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...


@dataclass(frozen=True)
class Link:
    page: Path
    line: int
    text: str  # the link text ('' for html)
    target: str

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


# ---------------------------------------------------------------------------- reading pages
def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) of the lines outside fenced code blocks, with the inline code
    spans blanked out (a link inside code is not a link)."""
    out: list[tuple[int, str]] = []
    fence = ""
    for n, line in enumerate(text.splitlines(), 1):
        opening = FENCE.match(line)
        if fence:
            closing = line.strip()
            if closing == fence[0] * len(closing) and len(closing) >= len(fence):
                fence = ""
            continue
        if opening:
            fence = opening.group(1)
            continue
        out.append((n, line))
    return out


def _blank_code(line: str) -> str:
    return CODE_SPAN.sub(lambda m: m.group(1) + "\0" * len(m.group(2)) + m.group(1), line)


def links_of(page: Path) -> list[Link]:
    found: list[Link] = []
    for n, line in prose_lines(page.read_text(encoding="utf-8")):
        blanked = _blank_code(line)
        for m in INLINE_LINK.finditer(blanked):
            text = line[m.start(1) : m.end(1)]  # with its code spans (the symbol of #L links)
            found.append(Link(page, n, text, m.group(2)))
        ref = REFERENCE.match(blanked)
        if ref:
            found.append(Link(page, n, ref.group(1), ref.group(2)))
        found.extend(Link(page, n, "", m.group(1)) for m in HTML_LINK.finditer(blanked))
    return found


def github_slug(heading: str) -> str:
    """GitHub's anchor of a heading's text: markup dropped, lowercased, every character that
    is not a letter, mark, number, connector (``_``), space or ``-`` removed, spaces -> ``-``."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # [text](url) -> text
    text = re.sub(r"<[^>]+>", "", text).replace("`", "").replace("*", "")
    kept = [
        ch
        for ch in text.lower()
        if ch in " -" or unicodedata.category(ch)[0] in "LMN" or unicodedata.category(ch) == "Pc"
    ]
    return "".join(kept).replace(" ", "-")


def heading_anchors(page: Path) -> set[str]:
    """The anchors GitHub gives ``page``: its headings' slugs (repeats numbered) and its
    ``<a id/name>`` targets."""
    text = page.read_text(encoding="utf-8")
    if page.suffix == ".ipynb":
        cells = json.loads(text).get("cells", [])
        text = "\n\n".join(
            "".join(c.get("source", [])) for c in cells if c.get("cell_type") == "markdown"
        )
    anchors: set[str] = set()
    counts: dict[str, int] = {}
    lines = prose_lines(text)
    for i, (_n, line) in enumerate(lines):
        anchors.update(HTML_ANCHOR.findall(line))
        m = HEADING.match(line)
        title = m.group(2) if m else None
        nxt = lines[i + 1][1] if i + 1 < len(lines) else ""
        if title is None and line.strip() and re.fullmatch(r"\s{0,3}(=+|-+)\s*", nxt):
            title = line.strip()  # a setext heading (underlined)
        if title is None:
            continue
        slug = github_slug(title)
        seen = counts.get(slug, 0)
        counts[slug] = seen + 1
        anchors.add(slug if seen == 0 else f"{slug}-{seen}")
    return anchors


def link_problem(link: Link) -> str | None:
    """Why ``link`` is broken (None: it resolves)."""
    target = link.target
    if EXTERNAL.match(target) or target.startswith("//"):
        return None
    path_part, _, anchor = target.partition("#")
    if path_part:
        resolved = (link.page.parent / path_part).resolve()
        if not resolved.is_relative_to(ROOT):
            return f"{target!r} leaves the repository"
        if not resolved.exists():
            return f"{target!r}: no such file"
    else:
        resolved = link.page
    if not anchor:
        return None
    if resolved.is_dir():
        return f"{target!r}: an anchor on a folder"
    if resolved.suffix in (".md", ".ipynb"):
        anchors = heading_anchors(resolved)
        if anchor not in anchors:
            near = sorted(a for a in anchors if anchor.split("-")[0] in a)[:5]
            return f"{target!r}: no heading with that anchor (near: {near})"
        return None
    lines_anchor = LINE_ANCHOR.match(anchor)
    if not lines_anchor:
        return f"{target!r}: a source file's anchor must be #L<line>"
    first = int(lines_anchor.group(1))
    return check_link(link.page, link.text, path_part, first, int(lines_anchor.group(2) or first))


# ---------------------------------------------------------------------------- the links
def test_the_pages_have_links_to_check() -> None:
    assert ROOT / "docs" / "README.ko.md" in PAGES
    assert len([link for page in PAGES for link in links_of(page)]) > 100


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    bad = [f"{link.where}: {problem}" for link in links_of(page) if (problem := link_problem(link))]
    assert not bad, "broken links:\n" + "\n".join(bad)


# ---------------------------------------------------------------------------- the checker
def test_github_slugs() -> None:
    assert (
        github_slug("Sentiment analysis in four commands") == "sentiment-analysis-in-four-commands"
    )
    assert github_slug("Course concept -> code") == "course-concept---code"
    assert (
        github_slug("BERT: pretraining, fine-tuning, NER, QA")
        == "bert-pretraining-fine-tuning-ner-qa"
    )
    assert github_slug("감성 분석: 명령 네 개") == "감성-분석-명령-네-개"
    assert github_slug("Lecture 003: ELMo (엘모)") == "lecture-003-elmo-엘모"
    assert github_slug("`attnkit explain` and [the labs](x.md)") == "attnkit-explain-and-the-labs"
    assert github_slug("snake_case & dots.py") == "snake_case--dotspy"


def test_the_checker_catches_each_kind_of_broken_link(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(f"{__name__}.ROOT", tmp_path)
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "m.py").write_text(
        "import os\n\n\nclass Thing:\n    def __init__(self):\n        self.proj = 1\n",
        encoding="utf-8",
    )
    other = tmp_path / "other.md"
    other.write_text('# Title\n\n## Part: one\n\n## Part: one\n\n<a id="here"></a>\n')
    page = tmp_path / "page.md"
    page.write_text(
        "\n".join(
            [
                "# Top",
                "[ok](other.md#part-one) [ok](other.md#part-one-1) [ok](other.md#here) [ok](#top)",
                "[`Thing`](src/m.py#L4) [`Thing.proj`](src/m.py#L6) [`Thing`](src/m.py#L3-L5)",
                "`[not a link](nowhere.md)`",
                "```",
                "[also not](nowhere.md)",
                "```",
                "[bad](nowhere.md) [bad](other.md#part-two) [bad](#nothing) [bad](../x.md)",
                "[`Thing`](src/m.py#L1) [`Thing`](src/m.py#L99) [Thing](src/m.py#L4)",
                '[bad](src/m.py#thing) <img src="missing.png">',
            ]
        ),
        encoding="utf-8",
    )
    problems = [(link.line, link_problem(link)) for link in links_of(page)]
    assert [n for n, p in problems if p is None] == [2, 2, 2, 2, 3, 3, 3]
    bad = [p for _, p in problems if p is not None]
    assert len(bad) == 9, bad
    assert "no such file" in bad[0] and "no heading" in bad[1] and "no heading" in bad[2]
    assert "leaves the repository" in bad[3]
    assert "does not define 'Thing' (defined at lines [4]" in bad[4]
    assert "has 6 lines" in bad[5] and "in backticks" in bad[6]
    assert "#L<line>" in bad[7] and "no such file" in bad[8]
    # tools/line_links.py --fix moves a line link to where its symbol is defined now
    fixed, problems = fix_page(page)
    assert "[`Thing`](src/m.py#L4) [`Thing`](src/m.py#L4) [Thing](src/m.py#L4)" in fixed
    assert "[`Thing.proj`](src/m.py#L6)" in fixed
    assert problems == ["page.md: [Thing](src/m.py#L4): defined at []"]  # (no symbol named)


# ---------------------------------------------------------------------------- the course map
def _map_text(page: Path) -> str:
    return page.read_text(encoding="utf-8")


def course_map_commands(page: Path) -> list[tuple[int, list[str]]]:
    """(line, argv after ``attnkit``) of every ``attnkit ...`` command of a course map: its
    code spans and the lines of its shell blocks."""
    found: list[tuple[int, list[str]]] = []
    text = _map_text(page)
    in_block = False
    for n, line in enumerate(text.splitlines(), 1):
        if FENCE.match(line):
            in_block = not in_block
            continue
        candidates = (
            [line.split(" #", 1)[0]] if in_block else [m.group(2) for m in CODE_SPAN.finditer(line)]
        )
        for code in candidates:
            for part in re.split(r"\s*(?:&&|;|\|\|)\s*", code.strip()):
                if part.startswith("attnkit "):
                    found.append((n, shlex.split(part)[1:]))
    return found


@pytest.mark.parametrize("page", COURSE_MAPS, ids=lambda p: p.name)
def test_the_course_map_links_both_languages_labs_and_explorer(page: Path) -> None:
    text = _map_text(page)
    other = "concepts.ko.md" if page.name == "concepts.md" else "concepts.md"
    assert f"]({other})" in text
    for lab in LABS:
        assert f"](../notebooks/{lab})" in text, lab
    assert "attnkit explain" in text and "ELMo" in text
    code_links = [link for link in links_of(page) if re.search(r"\.py#L\d+", link.target)]
    assert len(code_links) >= 60, len(code_links)


@pytest.mark.parametrize("page", COURSE_MAPS, ids=lambda p: p.name)
def test_the_course_maps_commands_parse_and_their_set_keys_exist(page: Path, capsys) -> None:
    from attnkit.app.cli import parse_args
    from attnkit.core.errors import ConfigError
    from attnkit.tasks.run_config import load_config

    commands = course_map_commands(page)
    assert len(commands) >= 20
    bad = []
    for n, argv in commands:
        try:
            args = parse_args(argv)
        except SystemExit:
            bad.append(f"{page.name}:{n}: attnkit {shlex.join(argv)}: {capsys.readouterr().err}")
            continue
        if argv[0] == "train":
            try:
                load_config(args.config, list(args.set or []))
            except ConfigError as err:
                bad.append(f"{page.name}:{n}: attnkit {shlex.join(argv)}: {err}")
    assert not bad, "course map commands attnkit refuses:\n" + "\n".join(bad)


@pytest.mark.parametrize("page", COURSE_MAPS, ids=lambda p: p.name)
def test_the_course_maps_explorer_anchors_are_the_agreed_ids(page: Path) -> None:
    named = set(re.findall(r"`#([a-z][a-z-]*)`", _map_text(page)))
    assert named <= EXPLORER_ANCHORS, sorted(named - EXPLORER_ANCHORS)
    assert named >= {"tour", "head", "padding", "soft-hard", "score-functions", "teacher-forcing"}


@pytest.mark.parametrize("page", COURSE_MAPS, ids=lambda p: p.name)
def test_the_lab_sections_the_course_map_names_exist(page: Path) -> None:
    """``[lab002](../notebooks/lab002_....ipynb) §2 ...``: the notebook has a section 2 (a
    markdown heading ``## 2. ...``)."""
    named: list[tuple[str, int]] = []
    for line in _map_text(page).splitlines():
        for m in re.finditer(r"\]\(\.\./notebooks/(lab\d{3}_\w+\.ipynb)\)([^|<]*)", line):
            named.extend((m.group(1), int(n)) for n in re.findall(r"§(\d+)", m.group(2)))
    assert len(named) >= 40
    missing = []
    for lab, number in sorted(set(named)):
        cells = json.loads((ROOT / "notebooks" / lab).read_text(encoding="utf-8"))["cells"]
        text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        if not re.search(rf"^#+\s*{number}\.\s", text, re.M):
            missing.append(f"{lab} §{number}")
    assert not missing, missing


def test_the_explorer_page_has_every_anchor_the_docs_name() -> None:
    page = ROOT / "src" / "attnkit" / "app" / "explain" / "static" / "explain.html"
    ids = set(re.findall(r'\bid="([^"]+)"', page.read_text(encoding="utf-8")))
    assert ids >= EXPLORER_ANCHORS, sorted(EXPLORER_ANCHORS - ids)


# ---------------------------------------------------------------------------- first screens
@pytest.mark.parametrize("readme", ["README.md", "docs/README.ko.md"])
def test_the_readmes_first_screen_points_to_the_explorer_labs_and_course_map(readme) -> None:
    page = ROOT / readme
    top = "\n".join(page.read_text(encoding="utf-8").splitlines()[:FIRST_SCREEN])
    assert re.search(r'attnkit explain \S+ "[^"]+"(?! --html)', top), "the served explorer"
    assert re.search(r'attnkit explain \S+ "[^"]+" --html \S+', top), "the offline page"
    notebooks = "notebooks/" if readme == "README.md" else "../notebooks/"
    assert f"]({notebooks})" in top or f"]({notebooks}lab000" in top, "the labs"
    course_map = "docs/concepts" if readme == "README.md" else "concepts"
    assert f"]({course_map}.md)" in top and f"]({course_map}.ko.md)" in top, "the course map"
    assert top.index("explain") < top.index("pip install"), "before the install section"


def test_the_demo_ends_with_the_explorer_command_for_its_run(tmp_path, monkeypatch, capsys):
    import attnkit.app.demo as demo
    from attnkit.app.cli import parse_args

    monkeypatch.setattr(demo, "_bundled", lambda name: name)
    monkeypatch.setattr(demo, "_sentiment", lambda *a, **k: None)
    monkeypatch.setattr(demo, "plot_positional_encoding", lambda *a, **k: tmp_path / "pe.png")
    assert demo.run_demo(tmp_path / "out") == 0
    out = capsys.readouterr().out
    tail = out[out.index("4) done") :]
    commands = re.findall(r"attnkit explain [^\n]*", tail)
    assert commands, tail
    run = tmp_path / "out" / "nsmc-quick"
    for command in commands:
        argv = shlex.split(command, comments=True)[1:]
        assert argv[1] == str(run)
        parse_args(argv)  # attnkit's parser takes it
    assert any("--html" in c for c in commands) and any("--html" not in c for c in commands)
