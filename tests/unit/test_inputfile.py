"""Every reader of a user's file says why it cannot read it: a name too long, a directory, no end."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from models.catalog import Catalog
from models.errors import InputError
from models.inputfile import read_input_bytes
from models.yamlfile import read_yaml

READERS: dict[str, Callable[[Path], object]] = {
    "catalog": Catalog.load,
    "yaml": read_yaml,
    "bytes": lambda path: read_input_bytes(path, 100),
}


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_name_too_long_is_a_clean_error(reader: str, tmp_path: Path) -> None:
    path = tmp_path / ("a" * 300)  # past NAME_MAX (255) on every Linux file system
    with pytest.raises(InputError, match="cannot read: File name too long") as info:
        READERS[reader](path)
    assert info.value.file == str(path)


@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_directory_is_named_as_one(reader: str, tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        READERS[reader](tmp_path)


def test_an_endless_file_is_refused_after_the_limit() -> None:
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    with pytest.raises(InputError, match="at most 100 bytes"):
        read_input_bytes(Path("/dev/zero"), 100)


def test_a_file_at_the_limit_is_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"x" * 100)
    assert read_input_bytes(path, 100) == b"x" * 100
    path.write_bytes(b"x" * 101)
    with pytest.raises(InputError, match="101 bytes; at most 100 bytes"):
        read_input_bytes(path, 100)


def test_a_missing_file_says_what_it_should_have_been(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="the demand CSV not found"):
        read_input_bytes(tmp_path / "none.csv", 100, missing="the demand CSV not found")
