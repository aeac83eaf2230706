"""The front page's commands work: every ``mtkit ...`` command of a fenced ``sh`` block of
README.md names a real subcommand with options it accepts, every ``make X`` names a real target,
the tour runs end to end on tiny data, and every relative link of README.md, docs/ and the
benchmark and recipe READMEs resolves (file and heading)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import click
import pytest
from docs_helpers import DOCS, LINKED, README, ROOT

from mtkit.cli import cli

OPERATORS = {"|", "||", "&&", ";", "&"}
REDIRECTS = {"<", ">", ">>", "2>", "2>&1", "<<"}


# ---------------------------------------------------------------------------------------------
# Reading the commands out of Markdown


def sh_blocks(markdown: str) -> list[str]:
    """The contents of the fenced ```sh blocks."""
    return re.findall(r"^```sh\n(.*?)^```", markdown, flags=re.S | re.M)


def shell_commands(block: str) -> list[list[str]]:
    """Each simple command of a shell block as its words: continuation lines joined, comments
    dropped, pipelines and lists split, redirections removed."""
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words: list[str] = []
        skip_next = False
        for token in [*lexer, ";"]:
            if skip_next:
                skip_next = False
            elif token in OPERATORS:
                if words:
                    commands.append(words)
                words = []
            elif token in REDIRECTS or set(token) <= set("<>&"):
                skip_next = True  # the redirection's file
            else:
                words.append(token)
    return commands


def mtkit_args(words: list[str]) -> list[str] | None:
    """The arguments after ``mtkit`` (``mtkit``, ``.venv/bin/mtkit``, ``python -m mtkit``,
    ``torchrun ... -m mtkit``), or None when the command does not run mtkit."""
    if words[0] == "mtkit" or words[0].endswith("/mtkit"):
        return words[1:]
    for i in range(len(words) - 1):
        if words[i] == "-m" and words[i + 1] == "mtkit":
            return words[i + 2 :]
    return None


# ---------------------------------------------------------------------------------------------
# Checking them against the CLI and the Makefiles


def check_mtkit(args: list[str]) -> list[str]:
    """Problems of one ``mtkit ARGS`` command line: an unknown subcommand, an option the
    subcommand does not take, a missing option value, a value outside a choice or of the wrong
    type, too many arguments. Files are not looked at (a README names files of its own)."""
    command: click.Command = cli
    path = ["mtkit"]
    rest = list(args)
    while isinstance(command, click.Group):
        if not rest or rest[0].startswith("-"):
            return [f"{' '.join(path)}: no subcommand"]
        name = rest.pop(0)
        sub = command.get_command(click.Context(command), name)
        if sub is None:
            return [f"{' '.join(path)}: no subcommand {name!r}"]
        command, path = sub, [*path, name]
    where = " ".join(path)
    ctx = click.Context(command, info_name=where)
    try:
        values, positional, _ = command.make_parser(ctx).parse_args(rest)
    except click.UsageError as error:
        return [f"{where}: {error.format_message()}"]
    problems = []
    for param in command.params:
        value = values.get(param.name)
        if value is None or isinstance(param, click.Argument):
            continue
        if isinstance(param.type, click.Path | click.File):
            continue
        try:
            param.type_cast_value(ctx, value)
        except click.BadParameter as error:
            problems.append(f"{where}: {param.opts[-1]}: {error.format_message()}")
    arguments = [p for p in command.params if isinstance(p, click.Argument)]
    if not any(p.nargs == -1 for p in arguments) and len(positional) > sum(
        p.nargs for p in arguments
    ):
        problems.append(f"{where}: unexpected arguments {positional}")
    return problems


def makefile_targets(makefile: Path) -> set[str]:
    text = makefile.read_text(encoding="utf-8")
    targets = set()
    for match in re.finditer(r"^([A-Za-z0-9_.%/$() -]+?)\s*::?(?!=)", text, flags=re.M):
        targets.update(match.group(1).split())
    return targets


def check_make(words: list[str]) -> list[str]:
    """Problems of one ``make ...`` command line: a target its Makefile lacks."""
    directory, targets, i = ROOT, [], 1
    while i < len(words):
        word = words[i]
        if word == "-C":
            directory, i = ROOT / words[i + 1], i + 2
            continue
        if not word.startswith("-") and "=" not in word:
            targets.append(word)
        i += 1
    makefile = directory / "Makefile"
    if not makefile.is_file():
        return [f"make -C {directory.relative_to(ROOT)}: no Makefile"]
    known = makefile_targets(makefile)
    return [f"{makefile.relative_to(ROOT)}: no target {t!r}" for t in targets if t not in known]


def check_block(block: str) -> list[str]:
    problems = []
    for words in shell_commands(block):
        args = mtkit_args(words)
        if args is not None:
            problems += check_mtkit(args)
        elif words[0] == "make":
            problems += check_make(words)
    return problems


# ---------------------------------------------------------------------------------------------
# Links


def github_anchor(heading: str) -> str:
    """The fragment GitHub gives a Markdown heading."""
    text = re.sub(r"[`*_\[\]()]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(markdown: Path) -> set[str]:
    text = markdown.read_text(encoding="utf-8")
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return {github_anchor(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


def broken_links(markdown: Path, text: str | None = None) -> list[str]:
    """Relative links of ``markdown`` (outside code) whose file, or heading, does not exist."""
    text = markdown.read_text(encoding="utf-8") if text is None else text
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        file, _, fragment = target.partition("#")
        path = (markdown.parent / file).resolve() if file else markdown
        if not path.exists():
            problems.append(f"{markdown.name}: {target}: no such file")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            problems.append(f"{markdown.name}: {target}: no such heading")
    return problems


# ---------------------------------------------------------------------------------------------
# The tests


def test_the_front_page_has_the_two_setup_commands_and_a_tour() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = sh_blocks(text)
    assert blocks and blocks[0].splitlines()[0].startswith("make demo")
    assert "make test" in blocks[0]  # .ci/run runs exactly this
    assert "make test" in (ROOT / ".ci" / "run").read_text()
    used = {args[0] for b in blocks for w in shell_commands(b) if (args := mtkit_args(w))}
    assert {"train", "translate", "evaluate", "serve", "export"} <= used
    assert len(text.splitlines()) <= 150


def test_every_readme_command_is_accepted_by_the_cli() -> None:
    blocks = sh_blocks(README.read_text(encoding="utf-8"))
    assert [problem for block in blocks for problem in check_block(block)] == []


@pytest.mark.parametrize("page", DOCS, ids=lambda p: p.name)
def test_every_docs_command_is_accepted_by_the_cli(page: Path) -> None:
    blocks = sh_blocks(page.read_text(encoding="utf-8"))
    assert [problem for block in blocks for problem in check_block(block)] == []


@pytest.mark.parametrize(
    "block, reported",
    [
        (
            "mtkit translate -m ckpt.pt --no-such-option -i in.txt",
            "No such option '--no-such-option'",
        ),
        ("mtkit translat -m ckpt.pt", "no subcommand 'translat'"),
        ("mtkit spm fit --model-prefix m a.txt", "no subcommand 'fit'"),
        ("mtkit export -m m.pt --format ct2 out/", "--format"),
        ("mtkit translate -m ckpt.pt --beam", "Option '--beam' requires an argument"),
        ("mtkit translate -m ckpt.pt --beam five", "--beam"),
        ("mtkit evaluate -i hyp -r ref extra", "unexpected arguments"),
        ("cat in.txt | mtkit translate \\\n    -m a.pt --bogus > out.txt", "--bogus"),
        ("torchrun --nproc_per_node 2 -m mtkit train --data d --nonsense 1", "--nonsense"),
        ("make demo && make no-such-target", "no target 'no-such-target'"),
        ("make -C recipes/multi30k all nothing-here", "no target 'nothing-here'"),
    ],
)
def test_the_checker_reports_a_wrong_command(block: str, reported: str) -> None:
    """The check can fail: a README whose tour had one of these lines would not pass."""
    readme = README.read_text(encoding="utf-8")
    wrong = readme.replace("```sh\n", f"```sh\n{block}\n", 1)
    problems = [p for b in sh_blocks(wrong) for p in check_block(b)]
    assert len(problems) == 1 and reported in problems[0], problems


def test_the_checker_passes_correct_commands() -> None:
    ok = """\
mtkit translate -m a.pt -m b.pt -i test.en -o out.de --beam 5 --lenpen 1.0  # a comment
echo 'A dog.' | mtkit translate -m a.pt --quiet > out.txt
mtkit spm train --model-prefix spm/m --vocab-size 8000 a.txt b.txt
make -C recipes/multi30k all SRC=de TGT=en
"""
    assert check_block(ok) == []


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    assert broken_links(page) == []


def test_a_broken_link_is_reported() -> None:
    text = "[a](docs/missing.md) [b](docs/train.md#no-such-heading) [c](https://x.org/y) [d](#data)"
    assert broken_links(README, text) == [
        "README.md: docs/missing.md: no such file",
        "README.md: docs/train.md#no-such-heading: no such heading",
    ]


# ---------------------------------------------------------------------------------------------
# The tour, run: its commands on a tiny stand-in for `make demo`'s work/demo

TINY = [
    "--max-updates",
    "2",
    "--validate-every",
    "1",
    "--device",
    "cpu",
    "-q",
    "--set",
    "model.d_model=32",
    "--set",
    "model.ffn_dim=64",
    "--set",
    "model.heads=2",
    "--set",
    "model.encoder_layers=1",
    "--set",
    "model.decoder_layers=1",
]


def tour_commands() -> list[list[str]]:
    """The tour's commands in order: those of README's sh blocks after the set-up one."""
    blocks = sh_blocks(README.read_text(encoding="utf-8"))[1:]
    return [words for block in blocks for words in shell_commands(block)]


def serve_and_ask(args: list[str], curl: list[str], cwd: Path) -> dict:
    """Start ``mtkit serve ARGS`` on a free port, eager (a compiled step takes minutes to build
    on its first start: tests/model/test_compiled.py), send it the request of the ``curl``
    command, return the JSON answer, stop the server."""
    cmd = [sys.executable, "-m", "mtkit", *args, "--port", "0", "--compile", "off"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    log = cwd / "serve.log"
    with log.open("w") as stderr:
        server = subprocess.Popen(cmd, cwd=cwd, stderr=stderr, env=env)
    try:
        deadline = time.monotonic() + 60
        base = None
        while True:  # the port it picked, then a model ready to translate
            if base is None:
                url = re.search(r"listening on (http://\S+?)/? ", log.read_text())
                base = url.group(1) if url else None
            if base is not None:
                try:
                    with urllib.request.urlopen(f"{base}/health", timeout=5) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
            running = server.poll() is None
            assert running and time.monotonic() < deadline, (
                f"serve did not start:\n{log.read_text()}"
            )
            time.sleep(0.2)
        target = next(w for w in curl if w.startswith("http"))
        path = "/" + target.split("/", 3)[3]
        data = curl[curl.index("-d") + 1].encode()
        headers = {"Content-Type": "application/json"}
        request = urllib.request.Request(base + path, data=data, headers=headers)
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def test_the_tour_runs(tmp_path: Path, tiny_dataset: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every tour command, as README has it, on a tiny work/demo; train gets a tiny model and two
    updates added, serve a free port."""
    pytest.importorskip("ctranslate2")
    pytest.importorskip("fastapi")
    from click.testing import CliRunner

    demo = tmp_path / "work" / "demo"
    shutil.copytree(tiny_dataset, demo / "en-de" / "data")
    (demo / "raw").mkdir()
    for side, lang in (("src", "en"), ("tgt", "de")):
        shutil.copy(tiny_dataset / f"valid.{side}.txt", demo / "raw" / f"test_2016_flickr.{lang}")
    monkeypatch.chdir(tmp_path)
    commands = tour_commands()
    ran = []
    for i, words in enumerate(commands):
        args = mtkit_args(words)
        if args is None:
            continue  # curl: sent by the serve step
        if args[0] == "serve":
            curl = commands[i + 1]
            assert curl[0] == "curl"
            answer = serve_and_ask(args, curl, tmp_path)
            assert isinstance(answer.get("translatedText"), str), answer
        else:
            extra = TINY if args[0] == "train" else []
            result = CliRunner().invoke(cli, [*args, *extra])
            assert result.exit_code == 0, f"{' '.join(words)}\n{result.output}"
            if args[0] == "evaluate":
                assert "BLEU|nrefs:1" in result.output and "chrF2|nrefs:1" in result.output
        ran.append(args[0])
    assert ran == ["train", "translate", "evaluate", "serve", "export", "translate"]
    lines = len((demo / "raw" / "test_2016_flickr.en").read_text().splitlines())
    for output in ("hyp.de", "hyp.ct2.de"):
        assert len((tmp_path / output).read_text().splitlines()) == lines


def test_the_benchmarks_index_names_every_script() -> None:
    """benchmarks/README.md names every script and helper module there (and in gpu/)."""
    index = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    bench = ROOT / "benchmarks"
    files = [*bench.glob("*.py"), *bench.glob("gpu/*.py"), *bench.glob("gpu/*.sh")]
    assert files
    assert [f.name for f in files if f"`{f.name}`" not in index and f.name not in index] == []


def reading_path(markdown: str) -> list[Path]:
    """The files of docs/layout.md's reading path: the backquoted names of its numbered table
    rows, a bare name in the folder of the name before it."""
    files, folder = [], ROOT
    for row in re.findall(r"^\| \d\. [^|]*\| ([^|]*)\|", markdown, flags=re.M):
        for name in re.findall(r"`([^`]+)`", row):
            path = ROOT / name if "/" in name else folder / name
            folder = path.parent
            files.append(path)
    return files


def test_the_reading_path_is_real_files_of_at_most_4000_lines() -> None:
    files = reading_path((ROOT / "docs" / "layout.md").read_text())
    assert len(files) >= 15 and all(path.is_file() for path in files), files
    lines = sum(len(path.read_text().splitlines()) for path in files)
    assert 3000 <= lines <= 4000, f"the reading path is {lines} lines"
    assert "its core" in README.read_text().split("\n\n")[1]  # what the front page promises
    row = "| 2. a | `mtkit/decoding/a.py`, `b.py` | x |\n"
    assert reading_path(row) == [ROOT / "mtkit/decoding/a.py", ROOT / "mtkit/decoding/b.py"]
