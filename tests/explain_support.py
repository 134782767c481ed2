"""What the explorer's browser tests share (tests/app/explain/test_explain_browser.py and the other
explorer test modules): writing a page with ``attnkit explain --html``, an opened page
that records its requests and script errors, and a heatmap read cell by cell through its
tooltips. The ``browser`` fixture itself is tests/conftest.py's."""

from __future__ import annotations

import json
import re
from pathlib import Path

from attnkit.app.cli import main
from browser_support import find_chromium

CHROMIUM, WHY_NOT = find_chromium()


def write(run: Path | str, text: str, out: Path, *options: str) -> Path:
    """``attnkit explain RUN TEXT --html OUT``: the page a learner opens."""
    assert main(["explain", str(run), text, "--html", str(out), *options]) == 0
    return out


def traces_of(path: Path) -> list[dict]:
    page = path.read_text(encoding="utf-8")
    found = re.search(r'id="trace-data">(.*?)</script>', page, re.S)
    return [t["trace"] for t in json.loads(found.group(1))["traces"]]


class Opened:
    """A page opened in the browser, with every request and script error it made."""

    def __init__(self, browser, url: str) -> None:
        self.page = browser.new_page(viewport={"width": 1100, "height": 1400})
        self.page.set_default_timeout(30_000)
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(url)
        self.page.wait_for_selector("body[data-ready=true]")

    def text(self, selector: str) -> str:
        return self.page.inner_text(selector)

    def column(self, table: str, name: str) -> list[str]:
        """The cells of column ``name`` of a displayed table, body rows in order."""
        heads = self.page.locator(f"{table} thead th").all_inner_texts()
        k = heads.index(name)
        return [row.locator("td").nth(k).inner_text()
                for row in self.page.locator(f"{table} tbody tr").all()]  # fmt: skip

    def close(self) -> None:
        assert not self.errors, self.errors
        self.page.close()


def offline(opened: Opened, path: Path) -> None:
    """Nothing but the file itself was requested (the page's CSP forbids anything else)."""
    assert opened.requests == [path.as_uri()], opened.requests


def shown(values, digits: int = 3) -> list[str]:
    return [f"{float(v):.{digits}f}" for v in values]


def pct(p: float) -> str:
    return f"{100 * p:.1f}%"


def assert_shown(cells: list[str], values, digits: int = 3) -> None:
    """Each displayed number is its value at ``digits`` decimals (give or take the last
    digit: the page's value and the Python API's may differ by float noise at a boundary)."""
    want = shown(values, digits)
    assert len(cells) == len(want), (cells, want)
    tolerance = 0.5 * 10**-digits + 1e-6
    for cell, value in zip(cells, values, strict=True):
        assert abs(float(cell) - float(value)) <= tolerance, (cells, want)


class Heatmap:
    """A heatmap canvas of an open page, cell by cell: hover one for its tooltip, click one.
    Its cells are square; their size is found by walking left from the bottom-right cell
    until the tooltip changes, then every cell's tooltip names its own row and column."""

    def __init__(self, page, selector: str, rows: int, cols: int) -> None:
        self.page = page
        canvas = page.locator(selector)
        canvas.scroll_into_view_if_needed()
        box = canvas.bounding_box()
        width, height = canvas.evaluate("c => [c.width, c.height]")
        assert (box["width"], box["height"]) == (width, height)  # drawn 1:1, not scaled
        self.x0, self.y0 = box["x"], box["y"]
        corner = self._tip(width - 4, height - 4)
        assert corner, f"no tooltip over {selector}"
        step = next(d for d in range(1, width) if self._tip(width - 4 - d, height - 4) != corner)
        self.cell = step + 1  # the corner point lies 2 pixels inside the last cell
        self.left = width - 2 - cols * self.cell
        self.top = height - 2 - rows * self.cell
        assert self.left >= 0 and self.top >= 0, (self.cell, width, height)

    def _tip(self, x: float, y: float) -> str:
        self.page.mouse.move(self.x0 + x + 0.5, self.y0 + y + 0.5)
        return self.page.inner_text("#tip") if self.page.is_visible("#tip") else ""

    def _center(self, i: int, j: int) -> tuple[float, float]:
        half = self.cell // 2
        return self.left + j * self.cell + half, self.top + i * self.cell + half

    def tip(self, i: int, j: int) -> str:
        """The tooltip of cell (row i, column j)."""
        return self._tip(*self._center(i, j))

    def click(self, i: int, j: int) -> None:
        x, y = self._center(i, j)
        self.page.mouse.click(self.x0 + x + 0.5, self.y0 + y + 0.5)
