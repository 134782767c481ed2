"""Docs check: every ``attnkit ...`` command (and ``python -m attnkit ...``) in the bash code
blocks of README.md and docs/README.ko.md

1. parses with attnkit's own command line parser (``attnkit.app.cli.parse_args``: the verbs,
   options and values ``main`` would accept; nothing is run), so a renamed verb or flag
   cannot stay in the READMEs; ``python -m attnkit.X`` names a module that exists;
2. is either run by a test (``RUN_BY_TESTS``: the command -> the test that runs it; its verbs
   and options must appear as strings in that test's code), or is marked in the README as
   needing what tests do not have (a dataset, a trained run, the network, minutes of
   training), or its block is run whole by a test that reads it from the README (an HTML
   comment just above the block: ``<!-- ... tests/<folder>/test_NAME.py runs every command of this
   block -->``). The marker is visible to readers:

       # needs: NSMC (attnkit data fetch nsmc), ~10 min    <- a comment line in a block: the
                                                              commands below it in the block
       attnkit data fetch nsmc   # ... (needs: network)    <- a trailing comment: that line

Commands are split at ``&&``, ``||``, ``;`` and ``|``; redirections are dropped; lines
ending in ``\\`` continue on the next line.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import pytest

from attnkit.app import cli
from attnkit.app.cli import build_parser, parse_args

ROOT = Path(__file__).resolve().parents[2]
READMES = (ROOT / "README.md", ROOT / "docs" / "README.ko.md")
SHELL_BLOCKS = ("bash", "sh", "shell", "console", "zsh")
MARKER = "needs:"
RUN_BLOCK = re.compile(r"<!--.*?\b(tests/[\w/]+\.py) runs every command of this block")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([\w+-]*)")
OPERATORS = {"&&", "||", ";", "|", "&"}
REDIRECTS = {">", ">>", "<", ">&", "<&", "&>", ">|"}

# A command (as written after `attnkit`, whitespace normalised) -> the test that runs it
# (path::function): its verbs and options appear as strings in that function's code.
RUN_BY_TESTS: dict[str, str] = {
    "--help": "tests/app/cli/test_cli.py::test_version_and_help",
    "--version": "tests/app/cli/test_cli.py::test_version_and_help",
    "data list": "tests/app/cli/test_cli_classify.py::test_data_list_and_missing_dataset_message",
    "plot positional-encoding --max-len 50 --d-model 128 -o pe.png": (
        "tests/app/cli/test_cli.py::test_plot_positional_encoding"
    ),
    "env": "tests/app/test_env_report.py::test_text_report_has_every_section",
    "env --json": "tests/app/test_env_report.py::test_json_keys_and_types",
}


@dataclass(frozen=True)
class Command:
    """One command of a README's code block: ``argv`` after ``attnkit`` (or ``module``:
    the X of ``python -m attnkit.X``), where it is, and whether it is marked."""

    where: str  # README.md:123
    text: str  # the command as written (one segment of the line)
    argv: tuple[str, ...]
    marked: bool
    module: str | None = None
    run_by: str | None = None  # the test that runs the whole block (RUN_BLOCK)

    @property
    def key(self) -> str:
        return shlex.join(self.argv)


def _split_comment(line: str) -> tuple[str, str]:
    """(code, comment) of a shell line: the comment starts at a ``#`` outside quotes that
    begins a word."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1 :]
    return line, ""


def _words(code: str) -> list[str]:
    lex = shlex.shlex(code, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    lex.commenters = ""
    return list(lex)


def _segments(words: list[str]) -> list[list[str]]:
    """The simple commands of a line: split at operators, redirections dropped."""
    out: list[list[str]] = [[]]
    skip = False
    for i, word in enumerate(words):
        if skip:
            skip = False
        elif word in OPERATORS:
            out.append([])
        elif word in REDIRECTS:
            skip = True  # (its target)
        elif word.isdigit() and i + 1 < len(words) and words[i + 1] in REDIRECTS:
            pass  # the descriptor of 2> etc.
        else:
            out[-1].append(word)
    return [s for s in out if s]


def _attnkit_argv(words: list[str]) -> tuple[tuple[str, ...], str | None] | None:
    """(argv after attnkit, module of ``-m attnkit.X``) of a simple command, or None when
    it runs something else (make, pip, curl, ...)."""
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words = words[1:]  # VAR=value prefixes
    if not words:
        return None
    if words[0] == "$":  # a console prompt
        words = words[1:]
    if words and Path(words[0]).name == "attnkit":
        return tuple(words[1:]), None
    if "-m" in words:
        i = words.index("-m")
        if i + 1 < len(words) and re.fullmatch(r"attnkit(\.[\w.]+)?", words[i + 1]):
            module = words[i + 1]
            if module == "attnkit":
                return tuple(words[i + 2 :]), None
            return tuple(words[i + 2 :]), module
    return None


def _shown(path: Path) -> str:
    """``path`` as messages name it: relative to the repository (else its name)."""
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name


def _closes(line: str, fence: str) -> bool:
    """Whether ``line`` closes a block opened by ``fence`` (as long or longer, same char)."""
    text = line.strip()
    return len(text) >= len(fence) and text == fence[0] * len(text)


def readme_commands(path: Path) -> list[Command]:
    """Every attnkit command in the shell code blocks of ``path``."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Command] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        fence, lang = opening.group(1), opening.group(2)
        end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        if lang in SHELL_BLOCKS:
            above = RUN_BLOCK.search(lines[i - 1]) if i else None
            run_by = above.group(1) if above else None
            found.extend(_block_commands(path, lines, i + 1, end, run_by))
        i = end + 1
    return found


def _block_commands(
    path: Path, lines: list[str], start: int, end: int, run_by: str | None
) -> list[Command]:
    found: list[Command] = []
    block_marked = False
    n = start
    while n < end:
        first = n
        line = lines[n]
        while line.rstrip().endswith("\\") and n + 1 < end:  # continued on the next line
            n += 1
            line = line.rstrip()[:-1] + " " + lines[n].strip()
        n += 1
        code, comment = _split_comment(line)
        if not code.strip():
            block_marked = block_marked or MARKER in comment
            continue
        for words in _segments(_words(code)):
            parsed = _attnkit_argv(words)
            if parsed is None:
                continue
            argv, module = parsed
            found.append(
                Command(
                    where=f"{_shown(path)}:{first + 1}",
                    text=" ".join(words),
                    argv=argv,
                    marked=block_marked or MARKER in comment,
                    module=module,
                    run_by=run_by,
                )
            )
    return found


def all_commands() -> list[Command]:
    return [c for readme in READMES for c in readme_commands(readme)]


def _parse_error(command: Command, capsys: pytest.CaptureFixture[str]) -> str | None:
    """Why attnkit's parser refuses ``command`` (None: it parses)."""
    if command.module is not None:
        try:
            spec = importlib.util.find_spec(command.module)
        except ModuleNotFoundError:
            spec = None
        return None if spec is not None else f"no module {command.module}"
    try:
        parse_args(list(command.argv))
    except SystemExit as exc:
        err = capsys.readouterr().err.strip()
        return None if exc.code == 0 else (err or f"exit {exc.code}")
    return None


def _verbs_and_options(argv: tuple[str, ...]) -> set[str]:
    """The words of ``argv`` that name something: the (sub)commands and the options."""
    parser: argparse.ArgumentParser | None = build_parser()
    names: set[str] = set()
    for word in argv:
        if word.startswith("-") and word != "-":
            names.add(word.split("=", 1)[0])
            continue
        actions = parser._actions if parser is not None else []
        subs = [a for a in actions if isinstance(a, argparse._SubParsersAction)]
        if subs and word in subs[0].choices:
            names.add(word)
            parser = subs[0].choices[word]
        else:
            parser = None  # a value: no (sub)command after it
    return names


def _test_source(target: str) -> str | None:
    """The code of the test ``path::function`` and of the module's functions it calls,
    directly or through each other (None: no such test)."""
    file, _, name = target.partition("::")
    path = ROOT / file
    if not path.is_file():
        return None
    source = path.read_text(encoding="utf-8")
    functions = {
        node.name: node
        for node in ast.parse(source).body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    if name not in functions:
        return None
    seen, todo = set(), [name]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for node in ast.walk(functions[current]):
            if isinstance(node, ast.Name) and node.id in functions:
                todo.append(node.id)
    return "\n".join(str(ast.get_source_segment(source, functions[f])) for f in sorted(seen))


# ---------------------------------------------------------------------------- the check
def test_the_readmes_have_commands_to_check() -> None:
    for readme in READMES:
        assert len(readme_commands(readme)) >= 10, readme


def test_every_readme_command_parses_with_attnkits_parser(capsys, monkeypatch) -> None:
    parser = build_parser()  # (one parser for all: argparse parsers are reusable)
    monkeypatch.setattr(cli, "build_parser", lambda: parser)
    bad = []
    for command in all_commands():
        error = _parse_error(command, capsys)
        if error is not None:
            bad.append(f"{command.where}: {command.text!r}: {error}")
    assert not bad, "README commands attnkit's parser refuses:\n" + "\n".join(bad)


def test_every_readme_command_is_run_by_a_test_or_marked_as_needing_data_or_time() -> None:
    bad = [
        f"{c.where}: {c.text!r}"
        for c in all_commands()
        if not c.marked and c.run_by is None and c.key not in RUN_BY_TESTS
    ]
    assert not bad, (
        f"README commands no test runs and none marked '# {MARKER} ...' (data, time):\n"
        + "\n".join(bad)
    )


def test_the_tests_said_to_run_whole_blocks_read_the_readme() -> None:
    for test in {c.run_by for c in all_commands() if c.run_by is not None}:
        path = ROOT / test
        assert path.is_file(), f"{test} (said to run a README block) does not exist"
        assert "README" in path.read_text(encoding="utf-8"), f"{test} does not read a README"


@pytest.mark.parametrize("key", sorted(RUN_BY_TESTS))
def test_the_tests_named_run_those_commands(key: str) -> None:
    assert key in {c.key for c in all_commands()}, f"{key!r} is in no README any more"
    source = _test_source(RUN_BY_TESTS[key])
    assert source is not None, f"{RUN_BY_TESTS[key]} does not exist"
    missing = {
        word
        for word in _verbs_and_options(tuple(shlex.split(key)))
        if f'"{word}"' not in source and f"'{word}'" not in source
    }
    assert not missing, f"{RUN_BY_TESTS[key]} does not pass {sorted(missing)}"


# ---------------------------------------------------------------------------- the extractor
def test_the_extractor_reads_blocks_markers_and_shell_syntax(tmp_path) -> None:
    page = tmp_path / "sample.md"
    text = "\n".join(
        [
            "```bash",
            "attnkit data list   # the catalogue",
            "make demo && attnkit env --json 2>/dev/null | head -1",
            'python -m attnkit predict runs/x "a # not a comment" - < in.txt',
            "attnkit data fetch nsmc   # download (needs: network)",
            "",
            "# needs: NSMC, ~2 min",
            "torchrun --nproc-per-node 2 \\",
            "    -m attnkit train nsmc-quick",
            "```",
            "```python",
            "attnkit.load('runs/x')",
            "```",
            "    ```sh",
            "    python -m attnkit.app.demo",
            "    ```",
            "<!-- pip path: tests/system/test_wheel.py runs every command of this block -->",
            "```bash",
            "attnkit recipes",
            "```",
        ]
    )
    page.write_text(text, encoding="utf-8")
    got = [(c.where, c.argv, c.marked, c.module, c.run_by) for c in readme_commands(page)]
    where = "sample.md:"
    assert got == [
        (where + "2", ("data", "list"), False, None, None),
        (where + "3", ("env", "--json"), False, None, None),
        (where + "4", ("predict", "runs/x", "a # not a comment", "-"), False, None, None),
        (where + "5", ("data", "fetch", "nsmc"), True, None, None),
        (where + "8", ("train", "nsmc-quick"), True, None, None),
        (where + "15", (), False, "attnkit.app.demo", None),
        (where + "19", ("recipes",), False, None, "tests/system/test_wheel.py"),
    ]


def test_a_stale_verb_or_flag_is_caught(capsys) -> None:
    def command(*argv: str) -> Command:
        return Command("README.md:1", " ".join(argv), argv, marked=True)

    assert _parse_error(command("predict", "runs/x", "text", "--explain", "h.png"), capsys) is None
    assert _parse_error(command("--version"), capsys) is None
    assert "invalid choice: 'fit'" in str(_parse_error(command("fit", "nsmc-quick"), capsys))
    assert "--beams" in str(_parse_error(command("translate", "r", "t", "--beams", "5"), capsys))
    assert "--json" in str(_parse_error(command("env", "[--json]"), capsys))
    gone = Command("README.md:1", "python -m attnkit.nothing", (), True, "attnkit.nothing")
    assert _parse_error(gone, capsys) == "no module attnkit.nothing"
