"""Read a user's YAML file safely: :func:`read_yaml`, for every YAML file a user hands gpuplan.

``yaml.safe_load`` is safe from code execution, not from inputs that mislead or stall. Here:

- **Duplicate keys** are an error naming the key and both lines. YAML keeps the last of two equal keys
  in a mapping silently, so a second ``horizon:`` block would quietly replace the first.
- **Size**: at most :data:`MAX_BYTES` (5 MB), checked before anything is parsed. The largest benchmark
  scenario is 35 KB; 5 MB leaves room for inline data and fails a wrong file (a log, a data dump) in
  milliseconds instead of a parse of a minute or more.
- **Values**: at most :data:`MAX_VALUES` (scalars, lists, mappings, aliases). Bytes alone do not bound
  the work: 5 MB of ``[0,0,0,...`` is 2.6 million values, 20 s to load even with libyaml; at a million
  the slowest file accepted loads in about 10 s (5 MB of real-looking data has ~800,000 values) and a
  bigger one is refused in a second or two. A real scenario has a few thousand values.
- **Nesting**: at most :data:`MAX_DEPTH` levels of lists and mappings, counted through aliases, and no
  alias inside the collection it names (a structure that contains itself). PyYAML composes nodes
  recursively, so 10,000 ``[`` would raise RecursionError; a scenario needs fewer than 10 levels.
- **Encoding**: UTF-8 only (a UTF-8 byte-order mark is accepted). UTF-16/UTF-32, NUL bytes (binary
  data), and bytes that are not UTF-8 (Latin-1, Windows-1252) are refused, saying what was found where:
  guessing an encoding could read a different text than the author wrote.
- **Reading**: a missing file, a directory, no permission or any other OS error is an ``InputError``.

Every problem is a :class:`models.errors.InputError` naming the file, ``line L, column C`` where there
is one, and the problem; the CLI prints it as one line and exits 2. The limits are checked on the parser's
event stream, before anything is built and without recursion.

Parsing uses libyaml (PyYAML's C parser) when it is installed, about 4 times faster than the pure-Python
parser; when libyaml finds a mistake in a file of ordinary size, the pure-Python parser reads the file
again for its message, which names the offending character or alias where libyaml's does not.
"""

from __future__ import annotations

import codecs
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node
from yaml.reader import ReaderError

from models.errors import InputError
from models.inputfile import read_input_bytes

__all__ = ["MAX_BYTES", "MAX_DEPTH", "MAX_VALUES", "read_yaml"]

MAX_BYTES = 5_000_000
MAX_VALUES = 1_000_000
MAX_DEPTH = 64
# a file libyaml refused is read again by pure-Python PyYAML, for its message, up to this size (< 2 s)
_MESSAGE_RERUN_CHARS = 256_000
_MERGE_TAG = "tag:yaml.org,2002:merge"


class _Refused(Exception):
    """A limit or a duplicate key, found while parsing (the file name is added by :func:`read_yaml`)."""

    def __init__(self, mark: Any, problem: str) -> None:  # a yaml Mark (Python's or libyaml's), or None
        super().__init__(problem)
        self.mark = mark
        self.problem = problem


class _UniqueKeys(SafeConstructor):
    """SafeConstructor whose mappings refuse a key written twice (merged ``<<:`` keys may be overridden)."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Any, Any]:
        if isinstance(node, MappingNode):
            seen: dict[Any, Node] = {}
            for key_node, _value in node.value:
                if key_node.tag == _MERGE_TAG:
                    continue
                key = self.construct_object(key_node, deep=True)  # cached: the base class reuses it
                try:
                    first = seen.setdefault(key, key_node)
                except TypeError:
                    continue  # an unhashable key: the base class reports it
                if first is not key_node:
                    line, again = first.start_mark.line + 1, key_node.start_mark.line + 1
                    raise _Refused(
                        key_node.start_mark,
                        f"duplicate key {key!r}, on line {line} and again on line {again} "
                        "(YAML would silently keep only the last one)",
                    )
        return super().construct_mapping(node, deep=deep)


class _PyLoader(_UniqueKeys, yaml.SafeLoader):
    """Pure-Python PyYAML: slower; its error messages name the offending character or alias."""


_Loader: type[Any] = _PyLoader
if yaml.__with_libyaml__:

    class _CLoader(_UniqueKeys, yaml.CSafeLoader):
        """libyaml parses, PyYAML's SafeConstructor builds (the same types as ``yaml.safe_load``)."""

    _Loader = _CLoader


def read_yaml(path: str | Path, what: str = "file") -> Any:
    """The YAML document in ``path`` as plain data (dicts, lists, scalars; None for an empty file).

    ``what`` names the file in messages ("file not found", "is a directory, not a sweep file"). Raises
    :class:`InputError` for anything but one readable UTF-8 YAML document within the limits above.
    """
    path = Path(path)
    text = _decode(path, _read(path, what))
    try:
        return _parse(text)
    except _Refused as refused:
        raise InputError(path, _at(refused.mark), refused.problem) from None
    except ReaderError as exc:  # a character YAML does not allow (a control character)
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        where = _at_offset(text, exc.position) if 0 <= exc.position <= len(text) else None
        raise InputError(path, where, f"YAML syntax error: character U+{char:04X} is not allowed") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or "not valid YAML"
        context = getattr(exc, "context", None)
        if context and problem.startswith("but "):  # "expected a single document in the stream, but ..."
            problem = f"{context}, {problem}"
        raise InputError(path, _at(mark), f"YAML syntax error: {problem}") from None
    except RecursionError:  # the depth limit should make this unreachable
        raise InputError(path, None, f"nested too deeply to read (at most {MAX_DEPTH} levels)") from None


def _read(path: Path, what: str) -> bytes:
    """At most MAX_BYTES + 1 bytes: a huge file (or /dev/zero) is refused without reading it all."""

    def too_large(size: int) -> str:
        found = f"is {size / 1e6:.1f} MB" if size > MAX_BYTES + 1 else "is larger"
        return (
            f"too large: gpuplan reads YAML files of at most {MAX_BYTES / 1e6:g} MB and this one {found} "
            "(a scenario is a few KB: is it the right file?)"
        )

    return read_input_bytes(
        path,
        MAX_BYTES,
        missing=f"{what} not found",
        directory=f"is a directory, not a {what}",
        too_large=too_large,
    )


def _decode(path: Path, data: bytes) -> str:
    """Strict UTF-8 (a UTF-8 byte-order mark is dropped); anything else says what it found, and where."""
    for bom, name in (
        (codecs.BOM_UTF32_LE, "UTF-32"),  # before UTF-16: FF FE 00 00 starts with FF FE
        (codecs.BOM_UTF32_BE, "UTF-32"),
        (codecs.BOM_UTF16_LE, "UTF-16"),
        (codecs.BOM_UTF16_BE, "UTF-16"),
    ):
        if data.startswith(bom):
            raise InputError(
                path, None, f"must be UTF-8 text, found {name} (it starts with a {name} byte-order mark)"
            )
    nul = data.find(b"\0")
    if nul >= 0:
        raise InputError(
            path,
            _at_byte(data, nul),
            f"must be UTF-8 text, found a NUL byte (byte offset {nul}): "
            "a binary file, or UTF-16 text without a byte-order mark",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        head = data[:4096]
        binary = any(byte < 0x20 and byte not in b"\t\n\r" for byte in head)
        kind = "a binary file" if binary else "text in another encoding (Latin-1 or Windows-1252?)"
        raise InputError(
            path,
            _at_byte(data, exc.start),
            f"must be UTF-8 text, found byte 0x{data[exc.start]:02X} (byte offset {exc.start}), "
            f"which is not UTF-8: {kind}",
        ) from None


def _parse(text: str) -> Any:
    """Check the limits on the event stream, then build the data; libyaml first, PyYAML for messages."""
    try:
        return _load(text, _Loader)
    except yaml.YAMLError as error:
        if "maximum nesting depth" in str(getattr(error, "problem", "")):  # libyaml's own limit, 1000
            raise _Refused(getattr(error, "problem_mark", None), _too_deep()) from None
        if _Loader is _PyLoader or len(text) > _MESSAGE_RERUN_CHARS:
            raise
        libyaml_error = error
    _load(text, _PyLoader)  # raises PyYAML's account of the same mistake
    raise libyaml_error  # PyYAML accepts what libyaml refused: report libyaml's


def _load(text: str, loader_class: type[Any]) -> Any:
    """Two passes: the event stream for the limits (cheap, stops early), then compose and construct."""
    scan = loader_class(text)
    try:
        _check_shape(scan)
    finally:
        scan.dispose()
    loader = loader_class(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _check_shape(loader: Any) -> None:
    """Count values and nesting from the event stream (no recursion); stop at the first excess.

    An alias nests the collection it names where it stands, so it counts that collection's height.
    """
    open_collections: list[list[Any]] = []  # [anchor, height of its tallest child], outermost first
    heights: dict[str, int | None] = {}  # anchor -> height of its node (None: still open)
    values = 0
    while loader.check_event():
        event = loader.get_event()
        if isinstance(event, yaml.CollectionEndEvent):
            anchor, tallest = open_collections.pop()
            height = tallest + 1
            if anchor is not None:
                heights[anchor] = height
        elif isinstance(event, yaml.NodeEvent):
            values += 1
            if values > MAX_VALUES:
                raise _Refused(
                    event.start_mark,
                    f"too large: more than {MAX_VALUES:,} values (scalars, lists and mappings); "
                    "a scenario has a few thousand: is it the right file?",
                )
            if isinstance(event, yaml.CollectionStartEvent):
                open_collections.append([event.anchor, 0])
                if event.anchor is not None:
                    heights[event.anchor] = None
                if len(open_collections) > MAX_DEPTH:
                    raise _Refused(event.start_mark, _too_deep())
                continue
            height = 0
            if isinstance(event, yaml.AliasEvent) and event.anchor in heights:
                named = heights[event.anchor]
                if named is None:
                    raise _Refused(
                        event.start_mark,
                        f"alias *{event.anchor} is inside the collection &{event.anchor} it names "
                        "(a structure that contains itself)",
                    )
                height = named
                if len(open_collections) + height > MAX_DEPTH:
                    raise _Refused(event.start_mark, _too_deep(f" (through alias *{event.anchor})"))
            elif isinstance(event, yaml.ScalarEvent) and event.anchor is not None:
                heights[event.anchor] = 0
        else:
            continue  # stream and document events
        if open_collections:
            open_collections[-1][1] = max(open_collections[-1][1], height)


def _too_deep(how: str = "") -> str:
    return (
        f"nested too deeply: more than {MAX_DEPTH} levels of lists and mappings{how}; "
        "a scenario needs fewer than 10"
    )


def _at(mark: Any) -> str | None:
    return f"line {mark.line + 1}, column {mark.column + 1}" if mark is not None else None


def _at_offset(text: str, index: int) -> str:
    line = text.count("\n", 0, index) + 1
    column = index - (text.rfind("\n", 0, index) + 1) + 1
    return f"line {line}, column {column}"


def _at_byte(data: bytes, offset: int) -> str:
    """``line L, column C`` (in characters) of a byte offset; everything before it decodes."""
    line_start = data.rfind(b"\n", 0, offset) + 1
    if line_start == 0 and data.startswith(codecs.BOM_UTF8):
        line_start = len(codecs.BOM_UTF8)
    line = data.count(b"\n", 0, offset) + 1
    column = len(data[line_start:offset].decode("utf-8", "replace")) + 1
    return f"line {line}, column {column}"
