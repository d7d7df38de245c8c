"""The README is the front door (issue 20): what it is, the two commands, use, a short figures table and the map, in
that order; its commands exist as written; history and timestamps live in docs/benchmarks.md, not here."""
from __future__ import annotations

import os
import re
import subprocess
import sys

from .conftest import REPO

README = (REPO / "README.md").read_text()
SECTIONS = ["## The two commands", "## Use", "## Current figures", "## How it is built"]


def _section(title: str) -> str:
    start = README.index(title)
    nxt = README.find("\n## ", start + len(title))
    return README[start:nxt if nxt >= 0 else len(README)]


def test_sections_in_order_and_short() -> None:
    at = [README.index(s) for s in SECTIONS]
    assert at == sorted(at) and README.startswith("# edgepack\n")
    assert len(README.splitlines()) < 200   # a front door; details belong in docs/


def test_the_two_commands_exist() -> None:
    for script in re.findall(r"`(scripts/\w+\.sh)`", _section("## The two commands")):
        assert os.access(REPO / script, os.X_OK), script
    assert re.findall(r"`(scripts/\w+\.sh)`", _section("## The two commands")) == ["scripts/demo.sh", "scripts/test.sh"]


def test_use_commands_name_real_options() -> None:
    """Every --option of every `package ...` line in Use is one `package [VERB] --help` lists."""
    block = re.search(r"```sh\n(.*?)```", _section("## Use"), re.S).group(1)
    helps: dict[str | None, str] = {}
    for line in block.splitlines():
        words = line.split("#", 1)[0].split()
        if not words or words[0] != "package":
            continue
        verb = words[1] if len(words) > 1 and re.fullmatch(r"[a-z]+", words[1]) else None
        if verb not in helps:
            r = subprocess.run([sys.executable, "-m", "packager.cli", *([verb] if verb else []), "--help"],
                               capture_output=True, text=True, cwd=REPO, timeout=120)
            assert r.returncode == 0, (verb, r.stderr)
            helps[verb] = r.stdout
        for option in re.findall(r"(--[a-z][a-z0-9-]*)", line.split("#", 1)[0]):
            assert option in helps[verb], (option, line)


def test_no_history_and_the_map_names_every_folder() -> None:
    assert not re.search(r"\bsessions? \d+|this session|session-by-session|\b\d\d:\d\d UTC", README, re.I)
    top = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True).stdout.split()
    folders = {f.split("/")[0] for f in top if "/" in f and not f.startswith(".")}
    the_map = _section("## How it is built")
    assert not [d for d in sorted(folders) if not re.search(rf"^(?:.* -> )?{d}/ ", the_map, re.M)]
