"""Reading a user's YAML file (models/yamlfile.py): every way a file can mislead or stall is an InputError.

Duplicate keys, encodings other than UTF-8, binary files, directories, unreadable files, files too large
and nesting too deep each raise an InputError naming the file, the line where there is one, and the
problem; through the CLI each is one line and exit 2. The scenario loader and the what-if sweep reader
both read through it. Most checks run with libyaml (when installed) and with the pure-Python parser.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from models import yamlfile
from models.errors import InputError
from models.scenario import load
from models.yamlfile import MAX_BYTES, MAX_DEPTH, MAX_VALUES, read_yaml
from planner.cli import app
from planner.planning.whatif import load_sweep

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "scenarios" / "mixed-fleet.yaml"


@pytest.fixture(params=["libyaml", "python"])
def parser(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Both parsers: libyaml (fast; skipped where PyYAML was built without it) and pure-Python PyYAML."""
    if request.param == "libyaml":
        if not yaml.__with_libyaml__:
            pytest.skip("PyYAML without libyaml")
    else:
        monkeypatch.setattr(yamlfile, "_Loader", yamlfile._PyLoader)
    return str(request.param)


def _refused(path: Path, *needles: str) -> InputError:
    """read_yaml refuses ``path``: the error names the file and every needle (in where or problem)."""
    with pytest.raises(InputError) as caught:
        read_yaml(path)
    error = caught.value
    assert error.file == str(path)
    for needle in needles:
        assert needle in error.format(), (needle, error.format())
    return error


def _write(path: Path, data: bytes | str) -> Path:
    path.write_bytes(data.encode("utf-8") if isinstance(data, str) else data)
    return path


# ---- duplicate keys ------------------------------------------------------------------------------------


def test_a_repeated_top_level_key_names_the_key_and_both_lines(tmp_path: Path, parser: str) -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    lines = text.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("horizon:")) + 1
    path = _write(tmp_path / "twice.yaml", text + "horizon: {start: 2027-01-01, hours: 48}\n")
    again = len(lines) + 1
    error = _refused(path, "duplicate key 'horizon'", f"line {first}", f"line {again}")
    assert error.where == f"line {again}, column 1"
    with pytest.raises(InputError, match="duplicate key 'horizon'"):
        load(path)


def test_a_repeated_nested_key_names_both_lines(tmp_path: Path, parser: str) -> None:
    path = _write(
        tmp_path / "nested.yaml",
        "name: x\ninference:\n  - name: chat\n    gpus_per_replica: 4\n"
        "    team: a\n    gpus_per_replica: 8\n",
    )
    error = _refused(path, "duplicate key 'gpus_per_replica'", "on line 4 and again on line 6")
    assert error.where == "line 6, column 5"


def test_keys_equal_as_values_are_duplicates_and_merge_keys_may_be_overridden(
    tmp_path: Path, parser: str
) -> None:
    _refused(_write(tmp_path / "bools.yaml", "yes: 1\ntrue: 2\n"), "duplicate key True", "line 1", "line 2")
    merged = _write(tmp_path / "merge.yaml", "base: &b {x: 1, y: 2}\nuse: {<<: *b, x: 3}\n")
    assert read_yaml(merged) == {"base": {"x": 1, "y": 2}, "use": {"x": 3, "y": 2}}


def test_a_sweep_file_with_a_repeated_key_is_refused(tmp_path: Path, parser: str) -> None:
    path = _write(
        tmp_path / "sweep.yaml",
        "variants:\n  - name: dear\n    vary: [spot_price=+50%]\n    name: cheap\n",
    )
    with pytest.raises(InputError) as caught:
        load_sweep(path)
    assert caught.value.file == str(path) and caught.value.where == "line 4, column 5"
    assert "duplicate key 'name', on line 2 and again on line 4" in caught.value.problem


def test_a_sweep_file_still_reads_and_says_what_is_missing(tmp_path: Path) -> None:
    path = _write(tmp_path / "sweep.yaml", "variants:\n  - {name: dear, vary: [spot_price=+50%]}\n")
    assert [(v.name, v.changes) for v in load_sweep(path)] == [("dear", ["spot_price=+50%"])]
    with pytest.raises(InputError, match="sweep file not found"):
        load_sweep(tmp_path / "none.yaml")


# ---- encodings and binary files ------------------------------------------------------------------------


def test_utf16_text_is_refused_as_not_utf8(tmp_path: Path) -> None:
    path = _write(tmp_path / "utf16.yaml", EXAMPLE.read_text(encoding="utf-8").encode("utf-16"))
    _refused(path, "must be UTF-8 text", "found UTF-16", "byte-order mark")
    no_bom = _write(tmp_path / "utf16le.yaml", "name: x\n".encode("utf-16-le"))
    _refused(no_bom, "must be UTF-8 text", "NUL byte", "UTF-16", "line 1, column 2")


def test_latin1_text_is_refused_naming_the_byte_and_its_place(tmp_path: Path) -> None:
    path = _write(tmp_path / "latin1.yaml", "name: x\ndescription: caf\xe9 fleet\n".encode("latin-1"))
    error = _refused(path, "must be UTF-8 text", "byte 0xE9", "byte offset 24", "Latin-1")
    assert error.where == "line 2, column 17"


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = _write(tmp_path / "bom.yaml", b"\xef\xbb\xbf" + EXAMPLE.read_bytes())
    assert load(path) == load(EXAMPLE)


@pytest.mark.parametrize(
    ("data", "needle"),
    [
        (b"\x89PNG\r\n\x1a\n" + b"\0\0\0\rIHDR" + bytes(range(256)), "NUL byte"),
        (b"\x89PNG\r\n\x1a\n", "a binary file"),
        (random.Random(13).randbytes(4096), "a binary file"),
        (b"name: a\0b\n", "NUL byte"),
    ],
    ids=["png", "png-header", "random-bytes", "nul"],
)
def test_binary_files_are_refused(tmp_path: Path, data: bytes, needle: str) -> None:
    _refused(_write(tmp_path / "binary.yaml", data), "must be UTF-8 text", needle)


def test_a_control_character_is_a_syntax_error_with_its_place(tmp_path: Path, parser: str) -> None:
    error = _refused(_write(tmp_path / "bell.yaml", "name: a\x07b\n"), "U+0007", "not allowed")
    assert error.where == "line 1, column 8"


# ---- what cannot be read -------------------------------------------------------------------------------


def test_a_directory_missing_or_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    _refused(tmp_path, "is a directory")
    _refused(tmp_path / "none.yaml", "file not found")
    _refused(tmp_path / "none.yaml" / "x.yaml", "file not found")
    plain = _write(tmp_path / "plain.yaml", "name: x\n")
    _refused(plain / "x.yaml", "cannot read", "Not a directory")


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file of mode 000 anyway")
def test_an_unreadable_file_is_an_input_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "locked.yaml", EXAMPLE.read_bytes())
    path.chmod(0)
    try:
        _refused(path, "cannot read: permission denied")
    finally:
        path.chmod(0o644)


@pytest.mark.parametrize(
    ("error", "needle"),
    [
        (PermissionError(13, "Permission denied"), "cannot read: permission denied"),
        (OSError(5, "Input/output error"), "cannot read: Input/output error"),
    ],
)
def test_os_errors_while_reading_are_input_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, needle: str
) -> None:
    """As the test above, for whoever runs as root (and for errors a test cannot provoke)."""
    path = _write(tmp_path / "scenario.yaml", EXAMPLE.read_bytes())

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise error

    monkeypatch.setattr(Path, "open", refuse)
    _refused(path, needle)


# ---- size and depth ------------------------------------------------------------------------------------


def test_a_file_too_large_fails_fast_saying_so(tmp_path: Path) -> None:
    path = _write(tmp_path / "huge.yaml", "x: [" + "1, " * 2_000_000 + "]\n")  # 6 MB, one list
    started = time.perf_counter()
    _refused(path, "too large", f"at most {MAX_BYTES / 1e6:g} MB", "6.0 MB")
    assert time.perf_counter() - started < 1.0


def test_too_many_values_fail_saying_so(tmp_path: Path) -> None:
    path = _write(tmp_path / "values.yaml", "[" + "0," * (MAX_VALUES + 10) + "]")  # within MAX_BYTES
    assert path.stat().st_size <= MAX_BYTES
    _refused(path, "too large", f"more than {MAX_VALUES:,} values")


@pytest.mark.parametrize(
    "text",
    [
        "[" * 10_000,
        "{a: " * 10_000,
        "- " * 10_000 + "1\n",
        "".join(" " * i + f"k{i}:\n" for i in range(MAX_DEPTH + 5)),
    ],
    ids=["flow-lists", "flow-mappings", "block-lists", "block-mappings"],
)
def test_deep_nesting_is_refused_without_recursion_error(tmp_path: Path, parser: str, text: str) -> None:
    _refused(_write(tmp_path / "deep.yaml", text), "nested too deeply", f"more than {MAX_DEPTH} levels")


def test_depth_counts_through_aliases_and_a_structure_may_not_contain_itself(
    tmp_path: Path, parser: str
) -> None:
    half = MAX_DEPTH // 2 + 5
    nested = "[" * half + "1" + "]" * half
    path = _write(tmp_path / "alias.yaml", f"a: &a {nested}\nb: {'[' * half}*a{']' * half}\n")
    _refused(path, "nested too deeply", "through alias *a", "line 2")
    _refused(_write(tmp_path / "self.yaml", "a: &a [1, *a]\n"), "alias *a", "contains itself")
    within = "[" * (MAX_DEPTH - 1) + "1" + "]" * (MAX_DEPTH - 1)
    assert read_yaml(_write(tmp_path / "ok.yaml", f"a: {within}\n")) is not None


# ---- the existing cases, unchanged ---------------------------------------------------------------------


def test_syntax_errors_keep_their_message_and_line(tmp_path: Path, parser: str) -> None:
    path = _write(tmp_path / "syntax.yaml", "name: broken\nhorizon: {start: 2027-01-01, hours: 48\n")
    error = _refused(path, "YAML syntax error: expected ',' or '}', but got '<stream end>'")
    assert error.where == "line 3, column 1"
    _refused(_write(tmp_path / "alias.yaml", "a: *nope\n"), "found undefined alias 'nope'", "line 1")
    _refused(_write(tmp_path / "two.yaml", "a: 1\n---\nb: 2\n"), "single document", "line 2")
    _refused(_write(tmp_path / "tag.yaml", "a: !!python/object/apply:os.system [ls]\n"), "constructor")


def test_an_empty_file_is_not_a_scenario(tmp_path: Path) -> None:
    path = _write(tmp_path / "empty.yaml", "")
    assert read_yaml(path) is None
    with pytest.raises(InputError, match="must be a YAML mapping"):
        load(path)


def test_the_example_reads_as_safe_load_reads_it(parser: str) -> None:
    """Same data as PyYAML's safe_load (its speed against safe_load is in bench/output_bench.py)."""
    assert read_yaml(EXAMPLE) == yaml.safe_load(EXAMPLE.read_text(encoding="utf-8"))


# ---- through the CLI -----------------------------------------------------------------------------------


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    files = {
        "duplicate key": _write(tmp_path / "dup.yaml", "name: a\nhorizon: 1\nhorizon: 2\n"),
        "utf-16": _write(tmp_path / "utf16.yaml", "name: a\n".encode("utf-16")),
        "latin-1": _write(tmp_path / "latin1.yaml", "name: caf\xe9\n".encode("latin-1")),
        "binary": _write(tmp_path / "image.yaml", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"),
        "too large": _write(tmp_path / "huge.yaml", "x: [" + "1, " * 2_000_000 + "]\n"),
        "deep": _write(tmp_path / "deep.yaml", "[" * 10_000),
        "directory": tmp_path / "dir.yaml",
    }
    files["directory"].mkdir()
    return files


@pytest.mark.parametrize(
    ("case", "needle"),
    [
        ("duplicate key", "duplicate key 'horizon', on line 2 and again on line 3"),
        ("utf-16", "must be UTF-8 text"),
        ("latin-1", "must be UTF-8 text"),
        ("binary", "must be UTF-8 text"),
        ("too large", "too large"),
        ("deep", "nested too deeply"),
        ("directory", "is a directory"),
    ],
)
def test_validate_refuses_in_one_line_with_exit_2(tmp_path: Path, case: str, needle: str) -> None:
    path = _bad_files(tmp_path)[case]
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert path.name in lines[0] and needle in lines[0], lines[0]


def test_validate_still_accepts_the_example() -> None:
    result = CliRunner().invoke(app, ["validate", str(EXAMPLE)])
    assert result.exit_code == 0, result.output
