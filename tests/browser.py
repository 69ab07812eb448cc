"""Open a local HTML file in a real headless Chromium and report what a person would see.

Not a test module: a helper the browser tests import (``from browser import open_page``; pytest puts
``tests/`` on ``sys.path`` because ``tests/conftest.py`` lives there).

``open_page(path)`` drives the system Chromium (``/usr/bin/chromium``, Debian's ``chromium`` package)
through the Python ``playwright`` package, so ``playwright install`` is never needed. It loads the file
from a ``file://`` URL in a fresh profile with networking switched off as far as Chromium allows, waits
until every plotly chart has drawn its svg, and returns a :class:`PageCheck`: console errors, uncaught
page errors, failed requests, every request that left ``file://`` (reports must work offline), the
title, the chart counts and the visible text.

``capture_charts(pages, captures)`` opens pages at given viewport widths, and printed (print media at a
paper's width, no script run in between), and returns where each plotly chart, its title and its mode
bar sit against the card that holds the chart.

When the ``playwright`` package or the Chromium binary is missing, ``open_page`` calls ``pytest.skip``
with the reason, so the suite still passes on machines without a browser; CI installs both.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

CHROMIUM = Path("/usr/bin/chromium")

# The machine's network is closed and a report must not need it: no background services, no QUIC.
LAUNCH_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Playwright adds its own defaults too (among them --disable-dev-shm-usage, which keeps a small /dev/shm
# in CI containers from crashing the renderer, and a fresh temporary --user-data-dir per launch).

# Schemes that never leave the machine; anything else counts as an outside request.
LOCAL_SCHEMES = ("file:", "data:", "blob:", "about:")

# Every element plotly draws into (class plotly-graph-div) must hold its main svg.
_ALL_CHARTS_DRAWN = """() => [...document.querySelectorAll('.plotly-graph-div')]
    .every(div => div.querySelector('svg.main-svg') !== null)"""
_CHARTS_RENDERED = """() => [...document.querySelectorAll('.js-plotly-plot')]
    .filter(div => div.querySelector('svg.main-svg') !== null).length"""
_CHART_DIVS = "() => document.querySelectorAll('.plotly-graph-div').length"
# Two animation frames: lets errors thrown by work scheduled during the first draw surface.
_SETTLE = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))"


@dataclass
class PageCheck:
    """What opening one page produced. Lists are empty for a clean page."""

    url: str
    title: str = ""
    console_errors: list[str] = field(default_factory=list)  # console.error and browser-logged errors
    page_errors: list[str] = field(default_factory=list)  # uncaught exceptions (the "pageerror" event)
    failed_requests: list[str] = field(default_factory=list)  # "URL: reason"
    outside_requests: list[str] = field(default_factory=list)  # URLs not file:/data:/blob:/about:
    chart_divs: int = 0  # elements with class plotly-graph-div
    charts_rendered: int = 0  # .js-plotly-plot elements that contain an svg.main-svg
    charts_timed_out: bool = False  # True if not every chart had drawn within the timeout
    text: str = ""  # document.body.innerText: the rendered, visible text

    def problems(self) -> list[str]:
        """Everything wrong with the page, one line each (empty for a clean, fully drawn page)."""
        found = [f"console error: {m}" for m in self.console_errors]
        found += [f"page error: {m}" for m in self.page_errors]
        found += [f"failed request: {m}" for m in self.failed_requests]
        found += [f"outside request: {m}" for m in self.outside_requests]
        if self.charts_timed_out or self.charts_rendered < self.chart_divs:
            found.append(f"charts: {self.charts_rendered} of {self.chart_divs} rendered")
        return found


def _describe(error) -> str:
    """An uncaught page error as "Name: message (where)", where = the first frame of its stack."""
    frames = [line.strip() for line in (error.stack or "").splitlines() if line.strip().startswith("at ")]
    where = f" ({frames[0]})" if frames else ""
    return f"{error.name or 'Error'}: {error.message}{where}"


def chromium_path() -> Path | None:
    """The system Chromium: /usr/bin/chromium, else ``chromium`` on PATH, else None."""
    if CHROMIUM.is_file():
        return CHROMIUM
    found = shutil.which("chromium")
    return Path(found) if found else None


def open_page(path: Path, *, timeout_s: float = 60.0, chart_timeout_s: float = 30.0) -> PageCheck:
    """Open ``path`` (a local HTML file) in headless Chromium and report on it; see :class:`PageCheck`.

    Waits for the load event, then up to ``chart_timeout_s`` for every plotly chart to draw (a chart
    that never draws is reported through ``charts_timed_out`` and the counts, not raised). Requests
    that would leave the machine are recorded and aborted, never sent.
    """
    try:
        from playwright.sync_api import TimeoutError as PlaywrightTimeout
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"browser test needs the playwright package (pip install '.[test]'): {exc}")
    chromium = chromium_path()
    if chromium is None:
        pytest.skip(f"browser test needs Chromium at {CHROMIUM} (apt-get install chromium)")

    path = Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(path)
    check = PageCheck(url=path.as_uri())

    def is_outside(url: str) -> bool:
        return not url.startswith(LOCAL_SCHEMES)

    def on_request(request) -> None:
        if is_outside(request.url):
            check.outside_requests.append(request.url)

    def on_console(message) -> None:
        if message.type == "error":
            where = message.location.get("url") or ""
            line = message.location.get("lineNumber")
            check.console_errors.append(f"{message.text} ({where}:{line})" if where else message.text)

    # launch() gives Chromium a fresh temporary --user-data-dir and deletes it on close.
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), headless=True, args=LAUNCH_ARGS, timeout=timeout_s * 1000
        )
        try:
            context = browser.new_context(service_workers="block")
            context.route(is_outside, lambda route: route.abort("internetdisconnected"))
            context.on("request", on_request)
            context.on("requestfailed", lambda r: check.failed_requests.append(f"{r.url}: {r.failure}"))
            page = context.new_page()
            page.on("console", on_console)
            page.on("pageerror", lambda error: check.page_errors.append(_describe(error)))
            page.on("websocket", lambda ws: check.outside_requests.append(ws.url))
            page.goto(check.url, wait_until="load", timeout=timeout_s * 1000)
            try:
                page.wait_for_function(_ALL_CHARTS_DRAWN, timeout=chart_timeout_s * 1000)
            except PlaywrightTimeout:  # the counts below say which charts are missing
                check.charts_timed_out = True
            page.evaluate(_SETTLE)
            check.title = page.title()
            check.chart_divs = page.evaluate(_CHART_DIVS)
            check.charts_rendered = page.evaluate(_CHARTS_RENDERED)
            check.text = page.evaluate("() => document.body ? document.body.innerText : ''")
        finally:
            browser.close()
    return check


# ------------------------------------------------------------------------------------------------
# Chart geometry: where each plotly chart, its titles and its mode bar sit against the card holding it
# ------------------------------------------------------------------------------------------------

#: A4 portrait (210 mm = 794 CSS px at 96 px/in) less 1 cm margins each side: the width printing lays out at.
A4_PRINT_WIDTH = 718

Box = tuple[float, float, float, float]  # left, top, right, bottom in CSS px, as getBoundingClientRect


@dataclass(frozen=True)
class Capture:
    """How to look at a page: drawn on a screen ``width`` px wide; with ``print_width``, then printed too.

    Printing is modelled as Chromium prints: the page is laid out again in print media at the paper's
    width and no script runs before the capture, so plotly never hears of the new width (its responsive
    redraw listens to window ``resize``, which a capture that prints withholds from the page).
    """

    name: str
    width: int
    print_width: int | None = None

    @property
    def printed(self) -> str:
        """The name of the printed capture."""
        return f"{self.name}, printed {self.print_width} px wide"


@dataclass
class ChartGeometry:
    """One chart's boxes: its card's padding box, what plotly drew, its title texts, its mode bar if shown."""

    chart: str  # the plotly div's id
    card: Box
    drawn: list[Box]  # the svg container and every svg.main-svg
    titles: list[Box]  # the chart title's text elements (title, subtitle)
    modebar: Box | None  # None when the mode bar is not displayed at all

    def overflow(self, tolerance: float = 0.5) -> list[str]:
        """The boxes that stick out of the card, each as "what: box"."""
        left, top, right, bottom = self.card
        found = []
        for kind, boxes in (("drawn", self.drawn), ("title", self.titles)):
            for b in boxes:
                if (
                    b[0] < left - tolerance
                    or b[1] < top - tolerance
                    or b[2] > right + tolerance
                    or (b[3] > bottom + tolerance)
                ):
                    card = tuple(round(v) for v in self.card)
                    found.append(f"{kind} {tuple(round(v) for v in b)} outside card {card}")
        return found

    def modebar_over_titles(self) -> list[Box]:
        """The title boxes the mode bar's box intersects."""
        if self.modebar is None:
            return []
        m = self.modebar
        return [t for t in self.titles if m[0] < t[2] and t[0] < m[2] and m[1] < t[3] and t[1] < m[3]]


_CHART_GEOMETRY = """() => [...document.querySelectorAll('.js-plotly-plot')].map(gd => {
    const box = e => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
    const card = gd.closest('.chart') || gd.parentElement;
    const r = card.getBoundingClientRect();
    const inner = [r.left + card.clientLeft, r.top + card.clientTop,
                   r.left + card.clientLeft + card.clientWidth, r.top + card.clientTop + card.clientHeight];
    const modebar = gd.querySelector('.modebar');
    const shown = modebar && getComputedStyle(modebar).display !== 'none'
        && modebar.getClientRects().length > 0;
    return {
        chart: gd.id,
        card: inner,
        drawn: [...gd.querySelectorAll('.svg-container, svg.main-svg')].map(box),
        titles: [...gd.querySelectorAll('.g-gtitle text')].filter(t => t.textContent.trim()).map(box),
        modebar: shown ? box(modebar) : null,
    };
})"""

# Keeps window "resize" listeners from being added: the page never redraws on a new viewport width.
_NO_RESIZE_LISTENERS = """(() => {
    const add = window.addEventListener;
    window.addEventListener = function (type, listener, options) {
        if (type === 'resize') return;
        return add.call(this, type, listener, options);
    };
})();"""


def _geometry(page) -> list[ChartGeometry]:
    return [
        ChartGeometry(
            chart=c["chart"],
            card=tuple(c["card"]),
            drawn=[tuple(b) for b in c["drawn"]],
            titles=[tuple(b) for b in c["titles"]],
            modebar=None if c["modebar"] is None else tuple(c["modebar"]),
        )
        for c in page.evaluate(_CHART_GEOMETRY)
    ]


def capture_charts(
    pages: Mapping[str, Path], captures: list[Capture], *, timeout_s: float = 60.0
) -> dict[str, dict[str, list[ChartGeometry]]]:
    """Open each of ``pages`` (name -> a local html file) once per capture, in one headless Chromium: per
    page name, per capture name (and :attr:`Capture.printed` name), every chart's geometry.

    Skips (like :func:`open_page`) where playwright or Chromium is missing.
    """
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:
        pytest.skip(f"browser test needs the playwright package (pip install '.[test]'): {exc}")
    chromium = chromium_path()
    if chromium is None:
        pytest.skip(f"browser test needs Chromium at {CHROMIUM} (apt-get install chromium)")
    out: dict[str, dict[str, list[ChartGeometry]]] = {page: {} for page in pages}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(chromium), headless=True, args=LAUNCH_ARGS, timeout=timeout_s * 1000
        )
        try:
            for page_name, path in pages.items():
                for capture in captures:
                    context = browser.new_context(
                        viewport={"width": capture.width, "height": 900}, service_workers="block"
                    )
                    context.route(lambda url: not url.startswith(LOCAL_SCHEMES), lambda route: route.abort())
                    if capture.print_width is not None:
                        context.add_init_script(script=_NO_RESIZE_LISTENERS)
                    page = context.new_page()
                    page.goto(Path(path).resolve().as_uri(), wait_until="load", timeout=timeout_s * 1000)
                    page.wait_for_function(_ALL_CHARTS_DRAWN, timeout=timeout_s * 1000)
                    page.evaluate(_SETTLE)
                    out[page_name][capture.name] = _geometry(page)
                    if capture.print_width is not None:
                        page.emulate_media(media="print")
                        page.set_viewport_size({"width": capture.print_width, "height": 900})
                        page.evaluate(_SETTLE)
                        out[page_name][capture.printed] = _geometry(page)
                    context.close()
        finally:
            browser.close()
    return out
