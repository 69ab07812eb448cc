"""Tests for models.catalog: the embedded snapshot, prefix matching, filters and strict CSV loading."""

from __future__ import annotations

import csv
import re
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from models.catalog import (
    CLOUDS,
    DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR,
    EMBEDDED_CATALOG_PATH,
    FABRICS,
    GPU_MODELS,
    PROVENANCE_COLUMNS,
    TIERS,
    Catalog,
    Offering,
)
from models.errors import InputError
from models.tiers import Tier

# Column order of spec/catalog-format.md (version 1).
FORMAT_COLUMNS = [
    "cloud",
    "region",
    "instance_type",
    "gpu_model",
    "gpus_per_node",
    "gpu_memory_gb",
    "fabric",
    "fabric_gbps",
    "on_demand_usd_h",
    "spot_usd_h",
    "reserved_1y_usd_h",
    "reserved_3y_usd_h",
    "spot_interruptions_per_hour",
    "max_nodes",
    "source",
]
REQUIRED_COLUMNS = [
    "cloud",
    "region",
    "instance_type",
    "gpu_model",
    "gpus_per_node",
    "gpu_memory_gb",
    "fabric",
    "on_demand_usd_h",
    "source",
]

# The 8-GPU training nodes the planner must be able to choose on every cloud.
REQUIRED_8GPU = {
    "aws": {
        "p4d.24xlarge": "A100-40GB",
        "p4de.24xlarge": "A100-80GB",
        "p5.48xlarge": "H100",
        "p5en.48xlarge": "H200",
    },
    "gcp": {
        "a2-highgpu-8g": "A100-40GB",
        "a2-ultragpu-8g": "A100-80GB",
        "a3-highgpu-8g": "H100",
        "a3-megagpu-8g": "H100",
        "a3-ultragpu-8g": "H200",
    },
    "azure": {
        "Standard_ND96asr_v4": "A100-40GB",
        "Standard_ND96amsr_A100_v4": "A100-80GB",
        "Standard_ND96isr_H100_v5": "H100",
        "Standard_ND96isr_H200_v5": "H200",
    },
}
# GCP's A2 nodes have only 100 Gbps gVNIC ethernet, which the format maps to fabric "none"
# (catalog-format.md); every other required 8-GPU node has a GPU fabric.
NO_FABRIC_8GPU = {("gcp", "a2-highgpu-8g"), ("gcp", "a2-ultragpu-8g")}

SMALL_INFERENCE = {
    "aws": {"g5.xlarge", "g5.12xlarge", "g6.xlarge", "g6e.xlarge"},
    "gcp": {"g2-standard-4", "a2-highgpu-1g", "a3-highgpu-1g"},
    "azure": {
        "Standard_NC24ads_A100_v4",
        "Standard_NC48ads_A100_v4",
        "Standard_NC40ads_H100_v5",
        "Standard_NC80adis_H100_v5",
    },
}

# Documented reserved ratios (CATALOG-SOURCES.md): (1y, 3y) multipliers of on-demand.
RESERVED_RATIOS = {"aws": (0.60, 0.40), "azure": (0.60, 0.40), "gcp": (0.63, 0.45)}


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return Catalog.load()


def make_offering(**overrides: object) -> Offering:
    fields: dict[str, object] = {
        "cloud": "aws",
        "region": "us-east-1",
        "instance_type": "x.large",
        "gpu_model": "H100",
        "gpus_per_node": 8,
        "gpu_memory_gb": 80.0,
        "fabric": "efa",
        "fabric_gbps": 3200.0,
        "on_demand_usd_h": 10.0,
        "spot_usd_h": 4.0,
        "reserved_1y_usd_h": 6.0,
        "reserved_3y_usd_h": 4.0,
        "spot_interruptions_per_hour": 0.01,
        "max_nodes": None,
        "source": "test",
    }
    fields.update(overrides)
    return Offering(**fields)  # type: ignore[arg-type]


def write_csv(path: Path, header: Sequence[str], rows: Sequence[Sequence[object]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def good_row(**overrides: object) -> list[object]:
    """A valid full-format row, as a list in FORMAT_COLUMNS order."""
    values: dict[str, object] = {
        "cloud": "aws",
        "region": "us-east-1",
        "instance_type": "p5.48xlarge",
        "gpu_model": "H100",
        "gpus_per_node": 8,
        "gpu_memory_gb": 80,
        "fabric": "efa",
        "fabric_gbps": 3200,
        "on_demand_usd_h": 55.04,
        "spot_usd_h": 20.0,
        "reserved_1y_usd_h": 33.0,
        "reserved_3y_usd_h": 22.0,
        "spot_interruptions_per_hour": "",
        "max_nodes": "",
        "source": "test 2026-11-29",
    }
    values.update(overrides)
    return [values[c] for c in FORMAT_COLUMNS]


# ---- the embedded snapshot -------------------------------------------------------------------------


def test_embedded_catalog_loads(catalog: Catalog) -> None:
    assert len(catalog) >= 40
    assert catalog.source == "embedded"
    assert len(Catalog.load("embedded")) == len(catalog)
    assert [o.id for o in Catalog.load(EMBEDDED_CATALOG_PATH)] == [o.id for o in catalog]


def test_embedded_header_is_exactly_the_format_order() -> None:
    with EMBEDDED_CATALOG_PATH.open(encoding="utf-8") as fh:
        assert next(csv.reader(fh)) == [
            *FORMAT_COLUMNS,
            *PROVENANCE_COLUMNS,
            "capacity_block_usd_h",
            "flex_start_usd_h",
        ]  # format 2


def test_every_cloud_has_at_least_two_regions(catalog: Catalog) -> None:
    for cloud in CLOUDS:
        regions = {o.region for o in catalog if o.cloud == cloud}
        assert len(regions) >= 2, f"{cloud}: {regions}"


@pytest.mark.parametrize(
    ("cloud", "instance_type", "gpu_model"),
    [(c, t, g) for c, types in REQUIRED_8GPU.items() for t, g in types.items()],
)
def test_required_8gpu_offerings_present_in_two_regions(
    catalog: Catalog, cloud: str, instance_type: str, gpu_model: str
) -> None:
    rows = [o for o in catalog if o.cloud == cloud and o.instance_type == instance_type]
    assert len({o.region for o in rows}) >= 2, f"{cloud} {instance_type} needs >= 2 regions"
    for o in rows:
        assert o.gpus_per_node == 8
        assert o.gpu_model == gpu_model
        if (cloud, instance_type) in NO_FABRIC_8GPU:
            assert o.fabric == "none"
        else:
            assert o.has_fabric, o.id
            assert o.fabric_gbps is not None and o.fabric_gbps > 0


@pytest.mark.parametrize("cloud", CLOUDS)
@pytest.mark.parametrize("family", ["A100", "H100", "H200"])
def test_each_cloud_sells_8gpu_nodes_of_each_family(catalog: Catalog, cloud: str, family: str) -> None:
    nodes = catalog.filter(cloud=cloud, gpu=family)
    assert any(o.gpus_per_node == 8 for o in nodes)
    if cloud == "gcp" and family == "A100":
        return  # no GPU fabric on GCP A2 (see NO_FABRIC_8GPU)
    assert any(o.gpus_per_node == 8 for o in nodes.filter(fabric_required=True))


def test_small_inference_offerings_present(catalog: Catalog) -> None:
    for cloud, types in SMALL_INFERENCE.items():
        found = {o.instance_type for o in catalog if o.cloud == cloud}
        assert types <= found, f"{cloud} missing {types - found}"


def test_every_row_has_a_dated_source(catalog: Catalog) -> None:
    for o in catalog:
        assert re.search(r"\b20\d\d-\d\d-\d\d\b", o.source), o.id


def test_embedded_values_are_canonical(catalog: Catalog) -> None:
    for o in catalog:
        assert o.cloud in CLOUDS
        assert o.gpu_model in GPU_MODELS
        assert o.fabric in FABRICS
        assert (o.fabric == "none") == (o.fabric_gbps is None), o.id
        assert o.max_nodes is None  # scenarios impose limits, not the snapshot
        assert o.spot_interruptions_per_hour == DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR[o.cloud]


def test_embedded_ids_are_unique(catalog: Catalog) -> None:
    ids = [o.id for o in catalog]
    assert len(ids) == len(set(ids))


def test_assumed_reserved_prices_follow_the_documented_ratios(catalog: Catalog) -> None:
    assumed = 0
    for o in catalog:
        for tier, ratio in zip((Tier.RESERVED_1Y, Tier.RESERVED_3Y), RESERVED_RATIOS[o.cloud], strict=True):
            said = o.price_provenance(tier)
            assert said.basis in ("quoted", "assumed"), (o.id, tier)
            if said.basis == "assumed":
                assumed += 1
                assert "ASSUMPTION" in said.source, (o.id, tier)
                assert o.price(tier) == pytest.approx(o.on_demand_usd_h * ratio, abs=2e-4), (o.id, tier)
    assert assumed == 68  # CATALOG-SOURCES.md: 68 of the 122 commitment prices


PUBLISHED = Path(__file__).resolve().parents[3] / "shared" / "data" / "commitment-prices"


@pytest.mark.skipif(
    not PUBLISHED.is_dir(), reason="../shared/data/commitment-prices not beside the repository"
)
def test_quoted_commitment_prices_are_the_published_rates(catalog: Catalog) -> None:
    """Each quoted 1- or 3-year price is one of the rates published for that region and type (read here from
    the research files directly, not through the tool that wrote the catalog), dated as its source."""
    published: dict[tuple[str, str, str], set[float]] = {}
    for cloud, kind in (("aws", "instance_type"), ("gcp", "machine_type"), ("azure", "vm_size")):
        with (PUBLISHED / f"{cloud}.csv").open(encoding="utf-8") as stream:
            for row in csv.DictReader(stream):
                for column, value in row.items():
                    term = "1y" if "_1y_" in column else "3y" if "_3y_" in column else None
                    if term and value:
                        published.setdefault((f"{cloud}:{row['region']}:{row[kind]}", term), set()).add(
                            float(value)
                        )
    quoted = 0
    for o in catalog:
        for tier, term in ((Tier.RESERVED_1Y, "1y"), (Tier.RESERVED_3Y, "3y")):
            said = o.price_provenance(tier)
            if said.basis == "quoted":
                quoted += 1
                assert o.price(tier) in published[(o.id, term)], (o.id, tier)
                assert said.as_of is not None and said.as_of.year >= 2025 and said.source, (o.id, tier)
    assert quoted == 54
    p5 = catalog.get("aws:us-east-1:p5.48xlarge")
    assert (p5.reserved_1y_usd_h, p5.reserved_3y_usd_h) == (34.6752, 23.77728)  # EC2 Instance SP, no upfront


@pytest.mark.skipif(
    not PUBLISHED.is_dir(), reason="../shared/data/commitment-prices not beside the repository"
)
def test_the_embedded_catalog_is_as_the_quoting_tool_writes_it() -> None:
    tool = Path(__file__).resolve().parents[2] / "tools" / "quote_embedded_catalog.py"
    done = subprocess.run(
        [sys.executable, str(tool), "--check", "--shared", str(PUBLISHED.parents[1])],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    ("offering_id", "on_demand"),
    [
        ("aws:us-east-1:p5.48xlarge", 55.04),  # FACTS.md 1.2, current list
        ("aws:us-east-1:p4d.24xlarge", 21.957642),  # catalog_seed.csv
        ("aws:us-east-1:p4de.24xlarge", 27.44705),
        ("aws:us-east-1:p5en.48xlarge", 63.296),
        ("aws:us-east-1:g5.12xlarge", 5.672),
        ("aws:us-east-1:g5.xlarge", 1.006),
        ("aws:us-east-1:g6.xlarge", 0.8048),
        ("aws:us-east-1:g6e.xlarge", 1.861),
        ("gcp:us-central1:a3-highgpu-8g", 8 * 10.9791),
        ("gcp:us-central1:a3-highgpu-1g", 10.9791),
        ("gcp:us-central1:a2-ultragpu-8g", 40.22162),  # commitment-prices/gcp.csv (Billing Catalog build)
        ("azure:eastus:Standard_ND96isr_H100_v5", 98.32),
        ("azure:eastus:Standard_ND96amsr_A100_v4", 32.77),
        ("azure:eastus:Standard_NC24ads_A100_v4", 3.673),
        ("azure:eastus:Standard_NC48ads_A100_v4", 9.554),
        ("azure:eastus:Standard_NC40ads_H100_v5", 6.98),
        ("azure:eastus:Standard_NC80adis_H100_v5", 17.64),
    ],
)
def test_on_demand_prices_match_the_seed_values(catalog: Catalog, offering_id: str, on_demand: float) -> None:
    assert catalog.get(offering_id).on_demand_usd_h == pytest.approx(on_demand, abs=1e-6)


@pytest.mark.parametrize(
    ("offering_id", "on_demand", "tolerance"),
    [
        ("azure:eastus:Standard_ND96asr_v4", 27.1968, 0.001),  # FACTS.md: 3.3996/GPU x 8
        ("gcp:us-central1:a2-highgpu-8g", 29.39, 0.01),  # FACTS.md: ~29.39
        ("gcp:us-central1:g2-standard-4", 0.71, 0.01),  # FACTS.md: ~0.71
    ],
)
def test_on_demand_prices_near_the_rounded_facts(
    catalog: Catalog, offering_id: str, on_demand: float, tolerance: float
) -> None:
    assert catalog.get(offering_id).on_demand_usd_h == pytest.approx(on_demand, abs=tolerance)


def test_spot_is_below_on_demand_where_offered(catalog: Catalog) -> None:
    # Not a loader rule (user catalogs may say otherwise); a sanity check of the snapshot.
    for o in catalog:
        if o.spot_usd_h is not None:
            assert 0 < o.spot_usd_h < o.on_demand_usd_h, o.id


# ---- Offering ----------------------------------------------------------------------------------------


def test_offering_id_fabric_and_price() -> None:
    o = make_offering()
    assert o.id == "aws:us-east-1:x.large"
    assert o.has_fabric
    assert not make_offering(fabric="none", fabric_gbps=None).has_fabric
    assert [o.price(t) for t in TIERS] == [6.0, 4.0, 10.0, 4.0, None, None]  # no block, no flex-start
    assert make_offering(spot_usd_h=None).price("spot") is None
    with pytest.raises(ValueError, match="unknown tier"):
        o.price("monthly")


def test_offering_is_immutable() -> None:
    o = make_offering()
    with pytest.raises(AttributeError):
        o.on_demand_usd_h = 1.0  # type: ignore[misc]


@pytest.mark.parametrize(
    "overrides",
    [{"gpus_per_node": 0}, {"fabric": "ethernet"}, {"gpu_model": "A100"}, {"spot_usd_h": -1.0}],
)
def test_offering_rejects_impossible_values(overrides: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        make_offering(**overrides)


@pytest.mark.parametrize(
    ("patterns", "model", "expected"),
    [
        (["A100"], "A100-40GB", True),
        (["A100"], "A100-80GB", True),
        (["H100"], "H100", True),
        (["H100"], "H100-NVL", True),
        (["H100"], "H200", False),
        (["H100-NVL"], "H100", False),
        (["h100-nvl"], "H100-NVL", True),
        (["a100-80"], "A100-80GB", True),
        (["A10G"], "A100-40GB", False),
        (["L4"], "L40S", True),  # literal prefix semantics (catalog-format.md)
        (["L40S"], "L4", False),
        (["B200", "H200"], "H200", True),
        (["B200", "H200"], "H100", False),
        ([], "L4", True),
        (None, "B200", True),
        ("H1", "H100-NVL", True),  # a bare string is one pattern, not a list of characters
        ("H", "A10G", False),
    ],
)
def test_matches_gpu_prefix_semantics(patterns: list[str] | str | None, model: str, expected: bool) -> None:
    assert make_offering(gpu_model=model).matches_gpu(patterns) is expected  # type: ignore[arg-type]


# ---- Catalog -----------------------------------------------------------------------------------------


def test_get_unknown_id_lists_close_ids(catalog: Catalog) -> None:
    with pytest.raises(KeyError, match=r"closest: .*aws:us-east-1:p5\.48xlarge"):
        catalog.get("aws:us-east-1:p5.48xlarg")


def test_duplicate_ids_rejected_in_code() -> None:
    with pytest.raises(ValueError, match="duplicate"):
        Catalog([make_offering(), make_offering()])


def test_filter_by_gpu(catalog: Catalog) -> None:
    h100 = catalog.filter(gpu="H100")
    assert {o.gpu_model for o in h100} == {"H100", "H100-NVL"}
    assert {o.gpu_model for o in catalog.filter(gpu=["A100"])} == {"A100-40GB", "A100-80GB"}
    assert {o.gpu_model for o in catalog.filter(gpu=["H200", "B200"])} == {"H200", "B200"}
    assert len(catalog.filter(gpu=[])) == len(catalog.filter(gpu=None)) == len(catalog)
    assert [o.id for o in h100] == [o.id for o in catalog if o.matches_gpu(["H100"])]  # order kept


def test_filter_by_cloud(catalog: Catalog) -> None:
    assert {o.cloud for o in catalog.filter(cloud="gcp")} == {"gcp"}
    assert {o.cloud for o in catalog.filter(cloud=["AWS", "azure"])} == {"aws", "azure"}
    assert len(catalog.filter(cloud=[])) == len(catalog)


def test_filter_by_regions(catalog: Catalog) -> None:
    subset = catalog.filter(regions={"aws": ["us-east-1"], "gcp": ("us-central1",)})
    assert {o.region for o in subset if o.cloud == "aws"} == {"us-east-1"}
    assert {o.region for o in subset if o.cloud == "gcp"} == {"us-central1"}
    # a cloud missing from the mapping (or mapped to nothing) is not restricted
    assert {o.id for o in subset if o.cloud == "azure"} == {o.id for o in catalog if o.cloud == "azure"}
    assert len(catalog.filter(regions={"aws": []})) == len(catalog)
    assert len(catalog.filter(regions={"aws": (r for r in ["us-east-2"])})) > 0  # generators are fine
    combined = catalog.filter(cloud="aws", regions={"aws": ["us-east-2"]}, gpu="H100")
    assert [o.id for o in combined] == ["aws:us-east-2:p5.48xlarge"]


def test_filter_fabric_required(catalog: Catalog) -> None:
    fabric = catalog.filter(fabric_required=True)
    assert len(fabric) > 0
    assert all(o.has_fabric for o in fabric)
    assert all(o.gpus_per_node == 8 for o in fabric)  # only training nodes carry a GPU fabric here
    assert "aws:us-east-1:g5.xlarge" not in {o.id for o in fabric}


def test_filter_returns_a_catalog_that_can_be_filtered_again(catalog: Catalog) -> None:
    sub = catalog.filter(cloud="aws").filter(gpu="H200")
    assert isinstance(sub, Catalog)
    assert {o.instance_type for o in sub} == {"p5en.48xlarge"}
    assert sub.get("aws:us-west-2:p5en.48xlarge").gpu_memory_gb == 141


def test_to_dataframe(catalog: Catalog) -> None:
    frame = catalog.to_dataframe()
    assert list(frame.columns) == [
        *FORMAT_COLUMNS,
        *PROVENANCE_COLUMNS,
        "capacity_block_usd_h",
        "flex_start_usd_h",
        "id",
        "on_demand_usd_gpu_h",
    ]
    assert len(frame) == len(catalog)
    row = frame.set_index("id").loc["aws:us-east-1:p5.48xlarge"]
    assert row["on_demand_usd_gpu_h"] == pytest.approx(6.88)  # FACTS.md 1.2: $6.88/GPU
    assert row["spot_interruptions_per_hour"] == DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR["aws"]
    assert frame.set_index("id")["spot_usd_h"].isna()["azure:eastus:Standard_ND96isr_H100_v5"]
    assert frame["max_nodes"].isna().all()
    assert Catalog([]).to_dataframe().empty


# ---- user catalogs -----------------------------------------------------------------------------------


def test_user_catalog_with_only_required_columns(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "mine.csv",
        REQUIRED_COLUMNS,
        [
            ["aws", "us-east-1", "p5.48xlarge", "H100", 8, 80, "efa", 40.0, "negotiated 2026-10-01"],
            ["gcp", "us-east4", "g2-standard-4", "L4", 1, 24, "none", 0.7, "list 2026-10-01"],
        ],
    )
    loaded = Catalog.load(path)
    assert loaded.source == str(path)
    o = loaded.get("aws:us-east-1:p5.48xlarge")
    assert o.on_demand_usd_h == 40.0
    assert (o.spot_usd_h, o.reserved_1y_usd_h, o.reserved_3y_usd_h) == (None, None, None)
    assert o.fabric_gbps is None
    assert o.max_nodes is None
    assert o.spot_interruptions_per_hour == DEFAULT_SPOT_INTERRUPTIONS_PER_HOUR["aws"]
    assert loaded.get("gcp:us-east4:g2-standard-4").spot_interruptions_per_hour == 0.015
    assert Catalog.load(str(path)).get("gcp:us-east4:g2-standard-4").gpus_per_node == 1


def test_user_catalog_optional_values_and_lenient_spelling(tmp_path: Path) -> None:
    path = tmp_path / "mine.csv"
    write_csv(
        path,
        FORMAT_COLUMNS,
        [
            good_row(
                cloud=" AWS ",
                gpu_model="h100",
                fabric="EFA",
                gpus_per_node="8.0",  # as spreadsheets export it
                spot_usd_h=70.0,  # spot above on-demand: allowed as given
                reserved_1y_usd_h=60.0,
                spot_interruptions_per_hour=0.05,
                max_nodes=4,
            ),
            [],  # a blank line in the middle is skipped
            good_row(region="us-east-2", max_nodes=0, fabric_gbps=""),
        ],
    )
    path.write_text("\ufeff" + path.read_text(encoding="utf-8") + "\n\n", encoding="utf-8")  # BOM, trailing
    loaded = Catalog.load(path)
    assert len(loaded) == 2
    o = loaded.get("aws:us-east-1:p5.48xlarge")
    assert (o.cloud, o.gpu_model, o.fabric, o.gpus_per_node) == ("aws", "H100", "efa", 8)
    assert o.spot_usd_h == 70.0
    assert o.spot_interruptions_per_hour == 0.05
    assert o.max_nodes == 4
    assert loaded.get("aws:us-east-2:p5.48xlarge").max_nodes == 0


def _rows(*rows: list[object]) -> list[list[object]]:
    return list(rows)


BAD_INPUTS = {
    "unknown cloud": (
        FORMAT_COLUMNS,
        _rows(good_row(cloud="oracle")),
        "row 2, column cloud",
        "aws, gcp, azure",
    ),
    "unknown gpu_model": (
        FORMAT_COLUMNS,
        _rows(good_row(gpu_model="H100-SXM5-80GB")),
        "row 2, column gpu_model",
        "A10G, L4, L40S, A100-40GB, A100-80GB, H100, H100-NVL, H200, B200",
    ),
    "unknown fabric": (FORMAT_COLUMNS, _rows(good_row(fabric="ENA")), "row 2, column fabric", "efa, tcpx"),
    "non-numeric price": (
        FORMAT_COLUMNS,
        _rows(good_row(on_demand_usd_h="$55")),
        "row 2, column on_demand_usd_h",
        "not a number",
    ),
    "negative price, second data row": (
        FORMAT_COLUMNS,
        _rows(good_row(), good_row(region="us-east-2", spot_usd_h=-1)),
        "row 3, column spot_usd_h",
        "must be greater than 0, got -1",
    ),
    "infinite price": (
        FORMAT_COLUMNS,
        _rows(good_row(reserved_3y_usd_h="inf")),
        "row 2, column reserved_3y_usd_h",
        "finite",
    ),
    "NaN price": (
        FORMAT_COLUMNS,
        _rows(good_row(on_demand_usd_h="nan")),
        "row 2, column on_demand_usd_h",
        "finite",
    ),
    "zero GPUs": (
        FORMAT_COLUMNS,
        _rows(good_row(gpus_per_node=0)),
        "row 2, column gpus_per_node",
        "must be at least 1, got 0",
    ),
    "fractional GPUs": (
        FORMAT_COLUMNS,
        _rows(good_row(gpus_per_node=2.5)),
        "row 2, column gpus_per_node",
        "must be a whole number, got 2.5",
    ),
    "word for GPUs": (
        FORMAT_COLUMNS,
        _rows(good_row(gpus_per_node="eight")),
        "row 2, column gpus_per_node",
        "'eight' is not a number",
    ),
    "fractional max_nodes": (
        FORMAT_COLUMNS,
        _rows(good_row(max_nodes=1.5)),
        "row 2, column max_nodes",
        "must be a whole number",
    ),
    "zero GPU memory": (
        FORMAT_COLUMNS,
        _rows(good_row(gpu_memory_gb=0)),
        "row 2, column gpu_memory_gb",
        "must be greater than 0",
    ),
    "negative interruption rate": (
        FORMAT_COLUMNS,
        _rows(good_row(spot_interruptions_per_hour=-0.1)),
        "row 2, column spot_interruptions_per_hour",
        "must be at least 0",
    ),
    "empty required value": (FORMAT_COLUMNS, _rows(good_row(region="")), "row 2, column region", "empty"),
    "empty source": (FORMAT_COLUMNS, _rows(good_row(source=" ")), "row 2, column source", "empty"),
    "duplicate id": (
        FORMAT_COLUMNS,
        _rows(good_row(), good_row(on_demand_usd_h=50)),
        "row 3, column instance_type",
        "already defined in row 2",
    ),
    "missing required column": (
        FORMAT_COLUMNS[:-1],
        _rows(good_row()[:-1]),
        "row 1, column source",
        "missing",
    ),
    "unknown column": (
        [*REQUIRED_COLUMNS, "spot_usd"],
        _rows(["aws", "r", "t", "H100", 8, 80, "efa", 1, "s", 0.5]),
        "row 1, column spot_usd",
        "did you mean 'spot_usd_h'",
    ),
    "column twice": (
        [*REQUIRED_COLUMNS, "region"],
        _rows(["aws", "r", "t", "H100", 8, 80, "efa", 1, "s", "r"]),
        "row 1, column region",
        "twice",
    ),
    "extra cells": (
        REQUIRED_COLUMNS,
        _rows(["aws", "r", "t", "H100", 8, 80, "efa", 1, "s", "surprise"]),
        "row 2, column 10",
        "header has 9",
    ),
    "blank lines count as rows": (
        FORMAT_COLUMNS,
        _rows(good_row(), [], good_row(region="us-east-2", cloud="ibm")),
        "row 4, column cloud",
        "unknown cloud",
    ),
    "header only": (FORMAT_COLUMNS, _rows(), "row 2", "no data rows"),
    # issue 13: every number finite and in a documented range, identifiers that fit an offering id
    "zero on-demand price": (
        FORMAT_COLUMNS,
        _rows(good_row(on_demand_usd_h=0)),
        "row 2, column on_demand_usd_h",
        "must be greater than 0, got 0",
    ),
    "zero spot price": (
        FORMAT_COLUMNS,
        _rows(good_row(spot_usd_h="0.0")),
        "row 2, column spot_usd_h",
        "leave the cell empty where the tier is not offered",
    ),
    "price of $10,000 an hour": (
        FORMAT_COLUMNS,
        _rows(good_row(reserved_1y_usd_h=10_000)),
        "row 2, column reserved_1y_usd_h",
        "must be less than 10000 USD per node-hour",
    ),
    "price 1e30": (
        FORMAT_COLUMNS,
        _rows(good_row(on_demand_usd_h="1e30")),
        "row 2, column on_demand_usd_h",
        "less than 10000 USD per node-hour, got 1e+30",
    ),
    "boolean price": (
        FORMAT_COLUMNS,
        _rows(good_row(spot_usd_h="TRUE")),
        "row 2, column spot_usd_h",
        "a boolean is not a number",
    ),
    "missing on-demand price": (
        FORMAT_COLUMNS,
        _rows(good_row(on_demand_usd_h="")),
        "row 2, column on_demand_usd_h",
        "required value is empty",
    ),
    "65 GPUs a node": (
        FORMAT_COLUMNS,
        _rows(good_row(gpus_per_node=65)),
        "row 2, column gpus_per_node",
        "must be at most 64 GPUs",
    ),
    "infinite GPUs": (
        FORMAT_COLUMNS,
        _rows(good_row(gpus_per_node="inf")),
        "row 2, column gpus_per_node",
        "must be a finite number",
    ),
    "GPU memory in MB": (
        FORMAT_COLUMNS,
        _rows(good_row(gpu_memory_gb=81920)),
        "row 2, column gpu_memory_gb",
        "must be at most 1024 GB",
    ),
    "negative fabric bandwidth": (
        FORMAT_COLUMNS,
        _rows(good_row(fabric_gbps=-400)),
        "row 2, column fabric_gbps",
        "must be at least 0",
    ),
    "interruptions in percent": (
        FORMAT_COLUMNS,
        _rows(good_row(spot_interruptions_per_hour=5)),
        "row 2, column spot_interruptions_per_hour",
        "must be at most 1 per node-hour",
    ),
    "NaN interruption rate": (
        FORMAT_COLUMNS,
        _rows(good_row(spot_interruptions_per_hour="nan")),
        "row 2, column spot_interruptions_per_hour",
        "must be a finite number",
    ),
    "max_nodes 1e30": (
        FORMAT_COLUMNS,
        _rows(good_row(max_nodes="1e30")),
        "row 2, column max_nodes",
        "must be at most 10000 nodes",
    ),
    "negative max_nodes": (
        FORMAT_COLUMNS,
        _rows(good_row(max_nodes=-1)),
        "row 2, column max_nodes",
        "must be at least 0",
    ),
    "colon in a region": (
        FORMAT_COLUMNS,
        _rows(good_row(region="us:east-1")),
        "row 2, column region",
        "no colon, space or control character",
    ),
    "space in an instance type": (
        FORMAT_COLUMNS,
        _rows(good_row(instance_type="p5 48xlarge")),
        "row 2, column instance_type",
        "not an identifier",
    ),
    "control character in a source": (
        FORMAT_COLUMNS,
        _rows(good_row(source="list\x00price")),
        "row 2, column source",
        "control character",
    ),
    "unknown column lists the known ones": (
        [*REQUIRED_COLUMNS, "on_demand"],
        _rows(["aws", "r", "t", "H100", 8, 80, "efa", 1, "s", 0.5]),
        "row 1, column on_demand",
        "did you mean 'on_demand_usd_h'?); catalog format 2 columns: "
        f"{', '.join([*FORMAT_COLUMNS, *PROVENANCE_COLUMNS])}",
    ),
}


@pytest.mark.parametrize(("header", "rows", "where", "problem"), BAD_INPUTS.values(), ids=BAD_INPUTS.keys())
def test_bad_input_names_row_and_column(
    tmp_path: Path, header: list[str], rows: list[list[object]], where: str, problem: str
) -> None:
    path = write_csv(tmp_path / "bad.csv", header, rows)
    with pytest.raises(InputError) as info:
        Catalog.load(path)
    assert info.value.file == str(path)
    assert info.value.where == where
    assert problem in info.value.problem
    assert str(info.value).startswith(f"{path}: {where}: ")


def test_spot_and_reserved_above_on_demand_are_allowed(tmp_path: Path) -> None:
    path = write_csv(
        tmp_path / "odd.csv",
        FORMAT_COLUMNS,
        [good_row(on_demand_usd_h=10, spot_usd_h=12, reserved_1y_usd_h=11, reserved_3y_usd_h=10.5)],
    )
    o = Catalog.load(path).get("aws:us-east-1:p5.48xlarge")
    assert (o.spot_usd_h, o.reserved_1y_usd_h, o.reserved_3y_usd_h) == (12, 11, 10.5)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.csv"
    path.write_text("", encoding="utf-8")
    with pytest.raises(InputError) as info:
        Catalog.load(path)
    assert (info.value.file, info.value.where) == (str(path), "row 1")
    assert "empty file" in info.value.problem


def test_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "nope.csv"
    with pytest.raises(InputError) as info:
        Catalog.load(path)
    assert (info.value.file, info.value.where, info.value.problem) == (str(path), None, "file not found")


def test_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "latin1.csv"
    path.write_bytes(",".join(REQUIRED_COLUMNS).encode() + b"\naws,r,t,H100,8,80,efa,1,caf\xe9\n")
    with pytest.raises(InputError, match="not UTF-8"):
        Catalog.load(path)
