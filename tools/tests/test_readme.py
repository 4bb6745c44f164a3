"""``tools.readme``: the README's "Use it in your project" example read as files and commands."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from tools.readme import ReadmeExampleError, user_example

REPO = Path(__file__).resolve().parents[2]

README = """\
# thing

```sh
not part of the example
```

## Use it in your project

```sh
pip install "agentreel-x[agent]"
```

Then `scenarios/a/scenario.toml` (see also `other.toml`) — no: `fixtures/a/scenario.toml`:

```toml
[[steps]]
type = "initialize"  # a comment stays
```

```sh
agentreel record a   # once
# a comment line

pytest
```

## Next section

```toml
ignored = true
```
"""


def test_files_and_commands_come_from_the_section_only(tmp_path: Path) -> None:
    (tmp_path / "README.md").write_text(README)
    example = user_example(tmp_path / "README.md")
    assert example.files == {
        PurePosixPath(
            "fixtures/a/scenario.toml"
        ): '[[steps]]\ntype = "initialize"  # a comment stays\n'
    }
    assert example.commands == ['pip install "agentreel-x[agent]"', "agentreel record a", "pytest"]


@pytest.mark.parametrize(
    ("readme", "message"),
    [
        ("# thing\n", "no '## Use it in your project' section"),
        ("## Use it in your project\n\n```toml\na = 1\n```\n\n```sh\npytest\n```\n", "follows no"),
        ("## Use it in your project\n\n`../x.toml`\n```toml\na = 1\n```\n", "must be a relative"),
        ("## Use it in your project\n\n`x.toml`\n```toml\na = 1\n```\n", "no sh block"),
    ],
)
def test_an_example_that_cannot_be_run_is_named(tmp_path: Path, readme: str, message: str) -> None:
    (tmp_path / "README.md").write_text(readme)
    with pytest.raises(ReadmeExampleError, match=message):
        user_example(tmp_path / "README.md")


def test_the_repository_readme_has_a_runnable_example() -> None:
    example = user_example(REPO / "README.md")
    assert any(path.name == "scenario.toml" for path in example.files)
    assert example.commands[0].startswith("pip install ")
    assert "pytest" in example.commands
