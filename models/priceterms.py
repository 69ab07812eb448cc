"""Every commitment and spot price a cloud quoted for an offering, beside the catalog: the terms file.

A catalog row holds one price per planning tier. The clouds sell more than one way to commit: AWS Reserved
Instances (standard or convertible, no, partial or all upfront) and Savings Plans (Compute, EC2 Instance),
GCP committed-use discounts, Azure reservations and savings plans; spot is priced per zone. ``gpuplan
catalog fetch`` writes all of them, one row each, to ``<catalog>.terms.csv``; the catalog's 1-year and
3-year prices are the cheapest node-shaped, no-upfront term of each length (:func:`headline_commitment`),
named in the row's provenance. Payment options and savings plans are planned from this file (issue 38).

Loading is strict, as the catalog's: every problem is an InputError naming the row and the column.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final, Literal, get_args

from models.csvheader import checked_header
from models.errors import InputError
from models.inputfile import decode_utf8, read_input_bytes
from models.numbers import Range, parse_number
from models.tiers import HOURS_PER_YEAR

__all__ = [
    "NODE_SHAPED_KINDS",
    "TERMS_COLUMNS",
    "Payment",
    "PriceTerm",
    "TermBasis",
    "TermKind",
    "headline_commitment",
    "read_terms",
    "terms_path_for",
    "write_terms",
]

#: What a term is. ``reserved-instance`` (AWS RI), ``savings-plan-ec2-instance`` and
#: ``savings-plan-compute`` (AWS), ``committed-use`` (GCP, resource-based, assembled for the machine),
#: ``reservation`` (Azure), ``savings-plan`` (Azure savings plan for compute), ``spot-zone`` (one zone's spot
#: price; the catalog's spot price is a statistic over them, named in its source).
TermKind = Literal[
    "reserved-instance",
    "savings-plan-ec2-instance",
    "savings-plan-compute",
    "committed-use",
    "reservation",
    "savings-plan",
    "spot-zone",
]
#: Where a term's price comes from (the catalog's bases; a term the API did not have is simply absent).
TermBasis = Literal["quoted", "assumed", "negotiated"]
#: How a commitment is paid; empty for spot.
Payment = Literal["no-upfront", "partial-upfront", "all-upfront", ""]
#: Terms that commit to nodes of one type (or one family in one region) and so price the catalog's
#: reserved tiers; Compute and Azure savings plans are dollars per hour across types (issue 38).
NODE_SHAPED_KINDS: Final = frozenset(
    {"reserved-instance", "savings-plan-ec2-instance", "committed-use", "reservation"}
)

TERMS_COLUMNS: Final = (
    "offering",
    "kind",
    "term_years",
    "offering_class",
    "payment",
    "usd_h",
    "upfront_usd",
    "effective_usd_h",
    "zone",
    "source",
    "as_of",
    "basis",
)
_REQUIRED: Final = frozenset({"offering", "kind", "usd_h", "source", "as_of"})
_PRICE = Range(ge=0, lt=10_000, unit="USD per node-hour")
_UPFRONT = Range(ge=0, lt=1e9, unit="USD per node")
MAX_TERMS_BYTES: Final = 256 * 1024 * 1024
MAX_TERMS_ROWS: Final = 1_000_000


@dataclass(frozen=True, slots=True)
class PriceTerm:
    """One way a cloud sells an offering, as its price API quoted it.

    ``usd_h`` is the recurring price per node-hour, ``upfront_usd`` the fee per node paid at purchase for
    the whole term; :attr:`effective_usd_h` spreads the fee over the term's hours, as the clouds' own
    comparisons do.
    """

    offering: str
    kind: TermKind
    term_years: int | None
    offering_class: str
    payment: Payment
    usd_h: float
    upfront_usd: float
    zone: str
    source: str
    as_of: datetime
    #: quoted (a price API, a published rate) or assumed (a documented guess); negotiated: the user's own
    basis: TermBasis = "quoted"

    @property
    def effective_usd_h(self) -> float:
        """Recurring rate plus the upfront fee spread over the term, per node-hour."""
        if not self.term_years or not self.upfront_usd:
            return self.usd_h
        return self.usd_h + self.upfront_usd / (self.term_years * HOURS_PER_YEAR)


def headline_commitment(terms: Iterable[PriceTerm], offering: str, years: int) -> PriceTerm | None:
    """The term that prices ``offering``'s ``years``-year tier in the catalog: the lowest effective rate among
    its node-shaped terms paid without upfront (the catalog's tiers are paid by the hour), else among its
    savings plans; None if it has neither."""
    candidates = [
        t
        for t in terms
        if t.offering == offering
        and t.term_years == years
        and t.kind != "spot-zone"
        and t.payment in ("no-upfront", "")
        and t.usd_h > 0
    ]
    # A node-shaped term first; a savings plan across types (Compute, Azure's) prices the tier only where the
    # cloud sells nothing node-shaped: bought to cover N nodes it costs its rate, and is never cheaper.
    shaped = [t for t in candidates if t.kind in NODE_SHAPED_KINDS] or candidates
    return min(shaped, key=lambda t: (t.effective_usd_h, t.kind, t.offering_class), default=None)


def terms_path_for(catalog_path: Path) -> Path:
    """``prices/catalog.csv`` -> ``prices/catalog.terms.csv``: where a catalog's terms file sits."""
    return catalog_path.with_name(f"{catalog_path.stem}.terms.csv")


def write_terms(terms: Iterable[PriceTerm], path: Path) -> None:
    """``terms`` as a terms CSV, written whole or not at all (a temporary sibling renamed into place)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream)
            writer.writerow(TERMS_COLUMNS)
            for t in sorted(terms, key=_order):
                writer.writerow(
                    [
                        t.offering,
                        t.kind,
                        "" if t.term_years is None else t.term_years,
                        t.offering_class,
                        t.payment,
                        f"{t.usd_h:.10g}",
                        f"{t.upfront_usd:.10g}",
                        f"{t.effective_usd_h:.10g}",
                        t.zone,
                        t.source,
                        t.as_of.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                        t.basis,
                    ]
                )
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _order(t: PriceTerm) -> tuple[str, str, int, str, str, str]:
    return (t.offering, t.kind, t.term_years or 0, t.offering_class, t.payment, t.zone)


def read_terms(path: Path) -> list[PriceTerm]:
    """A terms CSV, every cell checked; InputError naming the row and column of the first problem."""
    data = read_input_bytes(
        path,
        MAX_TERMS_BYTES,
        missing="terms file not found",
        directory="is a directory, expected a terms CSV file",
    )
    records = list(csv.reader(io.StringIO(decode_utf8(path, data), newline="")))
    while records and not any(cell.strip() for cell in records[-1]):
        records.pop()
    if not records:
        raise InputError(path, "row 1", f"empty file; expected the columns {', '.join(TERMS_COLUMNS)}")
    header = checked_header(
        path, records[0], TERMS_COLUMNS, _REQUIRED, f"terms columns: {', '.join(TERMS_COLUMNS)}"
    )
    if len(records) - 1 > MAX_TERMS_ROWS:
        raise InputError(path, f"row {MAX_TERMS_ROWS + 2}", f"more than {MAX_TERMS_ROWS:,} terms in one file")
    terms = []
    for index, record in enumerate(records[1:]):
        if any(cell.strip() for cell in record):
            terms.append(_parse(path, index + 2, header, record))
    return terms


def _parse(path: Path, row: int, header: list[str], record: list[str]) -> PriceTerm:
    if any(cell.strip() for cell in record[len(header) :]):
        raise InputError(
            path,
            f"row {row}, column {len(header) + 1}",
            f"{len(record)} cells but the header has {len(header)}",
        )
    cells = {name: (record[i].strip() if i < len(record) else "") for i, name in enumerate(header)}

    def fail(column: str, problem: str) -> InputError:
        return InputError(path, f"row {row}, column {column}", problem)

    def text(column: str) -> str:
        value = cells.get(column, "")
        if not value and column in _REQUIRED:
            raise fail(column, "required value is empty")
        if any(not ch.isprintable() for ch in value):
            raise fail(column, "contains a control character")
        return value

    def number(column: str, limits: Range) -> float:
        raw = text(column)
        if not raw:
            return 0.0
        try:
            return parse_number(raw, limits)
        except ValueError as exc:
            raise fail(column, str(exc)) from None

    offering = text("offering")
    if offering.count(":") != 2 or any(not part for part in offering.split(":")):
        raise fail("offering", f"{offering!r} is not an offering id cloud:region:instance_type")
    kind = text("kind")
    if kind not in get_args(TermKind):
        raise fail("kind", f"unknown kind {kind!r}; valid: {', '.join(get_args(TermKind))}")
    years_text = text("term_years")
    years: int | None = None
    if years_text:
        if years_text not in ("1", "3"):
            raise fail("term_years", f"{years_text!r}: a term is 1 or 3 years")
        years = int(years_text)
    elif kind != "spot-zone":
        raise fail("term_years", f"a {kind} term has a length: 1 or 3")
    payment = text("payment")
    if payment not in get_args(Payment):
        raise fail("payment", f"unknown payment {payment!r}; valid: no-upfront, partial-upfront, all-upfront")
    usd_h = number("usd_h", _PRICE)
    upfront = number("upfront_usd", _UPFRONT)
    as_of_text = text("as_of")
    try:
        as_of = datetime.fromisoformat(as_of_text)
    except ValueError:
        raise fail("as_of", f"{as_of_text!r} is not an ISO 8601 time") from None
    as_of = as_of.replace(tzinfo=UTC) if as_of.tzinfo is None else as_of.astimezone(UTC)
    basis = text("basis") or "quoted"  # files written before the column: every term was fetched
    if basis not in get_args(TermBasis):
        raise fail("basis", f"unknown basis {basis!r}; valid: {', '.join(get_args(TermBasis))}")
    term = PriceTerm(
        offering=offering,
        kind=kind,  # type: ignore[arg-type]
        term_years=years,
        offering_class=text("offering_class"),
        payment=payment,  # type: ignore[arg-type]
        usd_h=usd_h,
        upfront_usd=upfront,
        zone=text("zone"),
        source=text("source"),
        as_of=as_of,
        basis=basis,  # type: ignore[arg-type]
    )
    written = cells.get("effective_usd_h", "")
    if written:
        effective = number("effective_usd_h", _PRICE)
        if abs(effective - term.effective_usd_h) > 1e-6 * max(1.0, effective):
            raise fail(
                "effective_usd_h",
                f"{effective:.6g} is not usd_h + upfront_usd / the term's hours ({term.effective_usd_h:.6g})",
            )
    return term
