"""Inline SVG charts (pure Python, no dependencies) for the self-contained HTML report."""
from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from html import escape as html_escape

# One colour per record status, in every chart that splits by status; other series (latency percentiles)
# take PALETTE's colours, none of which is a status colour.
STATUS_COLOURS: Mapping[str, str] = {"ok": "#2f855a", "failed": "#c53030", "backout": "#dd6b20",
                                     "dropped": "#718096"}
PALETTE = ("#2b6cb0", "#6b46c1", "#319795", "#b7791f", "#d53f8c", "#1a202c")
# Characters never written raw into the report: C0 and C1 controls and DEL (\\xNN), line and paragraph
# separators and bidirectional overrides (\\uNNNN), which would hide or reorder the text around them.
FONT = 'font-family="sans-serif" font-size="11"'
CHAR_WIDTH = 6.2  # average advance of an 11 px sans-serif character
LABEL_CHARS = 48  # the longest bar label drawn whole
INVISIBLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape_of(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """text with every invisible character (INVISIBLE) written as a visible escape, e.g. \\x07."""
    return INVISIBLE.sub(lambda m: _escape_of(m.group()), text)


def escape(text: str) -> str:
    """text for HTML or SVG: invisible characters as visible escapes, then the markup characters escaped."""
    return html_escape(visible(text))


def marked(text: str) -> str:
    """text for HTML with each invisible character as its escape in a span of class esc, so that it stands
    apart from the same characters typed (a backslash in a message key)."""
    return INVISIBLE.sub(lambda m: f"<span class=esc>{_escape_of(m.group())}</span>", html_escape(text))


def series_colour(name: str, index: int, colours: Mapping[str, str] | None) -> str:
    """A series' colour: its colour in colours (e.g. STATUS_COLOURS), else PALETTE's index-th."""
    if colours is not None and name in colours:
        return colours[name]
    return PALETTE[index % len(PALETTE)]


def _nice_max(value: float) -> float:
    """Round an axis maximum up to 1, 2 or 5 times a power of ten."""
    if value <= 0:
        return 1.0
    magnitude = 10 ** (len(str(int(value))) - 1)
    for step in (1, 2, 5, 10):
        if value <= step * magnitude:
            return float(step * magnitude)
    return float(10 * magnitude)  # pragma: no cover


def _fmt(value: float) -> str:
    if value >= 1_000_000:
        return f"{value / 1_000_000:.1f}M"
    if value >= 1_000:
        return f"{value / 1_000:.1f}k"
    return f"{value:g}"


def stacked_columns(
    labels: Sequence[str], series: dict[str, Sequence[float]], title: str, width: int = 760, height: int = 260,
    colours: Mapping[str, str] | None = None,
) -> str:
    """Vertical stacked columns (e.g. records per hour split by status; colours: STATUS_COLOURS)."""
    left, bottom, top = 56, 48, 24
    plot_w, plot_h = width - left - 10, height - bottom - top
    totals = [sum(s[i] for s in series.values()) for i in range(len(labels))]
    vmax = _nice_max(max(totals, default=0))
    n = max(len(labels), 1)
    bar_w = plot_w / n
    parts = [_header(width, height, title), _y_axis(left, top, plot_h, vmax, plot_w)]
    for i, label in enumerate(labels):
        y = top + plot_h
        for k, (name, values) in enumerate(series.items()):
            h = values[i] / vmax * plot_h
            if h > 0:
                y -= h
                parts.append(
                    f'<rect x="{left + i * bar_w + 1:.1f}" y="{y:.1f}" width="{max(bar_w - 2, 1):.1f}" '
                    f'height="{h:.1f}" fill="{series_colour(name, k, colours)}"><title>{escape(label)} '
                    f"{escape(name)}: {values[i]:g}</title></rect>"
                )
        if n <= 12 or i % max(n // 12, 1) == 0:
            parts.append(
                f'<text x="{left + (i + 0.5) * bar_w:.1f}" y="{top + plot_h + 14}" text-anchor="middle" '
                f"{FONT}>{escape(label)}</text>"
            )
    parts.append(_legend(list(series), left, height - 14, colours))
    parts.append("</svg>")
    return "".join(parts)


def grouped_bars(
    categories: Sequence[str], series: dict[str, Sequence[float]], title: str, unit: str = "",
    width: int = 760, log: bool = False, colours: Mapping[str, str] | None = None,
) -> str:
    """Horizontal grouped bars (e.g. p50/p95/p99 latency per route); log: bar length on a log scale;
    colours: series colours by name (STATUS_COLOURS for series that are statuses).

    The label column is as wide as the longest category (up to LABEL_CHARS characters; a longer one is
    shortened with an ellipsis and shown whole as the label's tooltip). Bars of 0 are not drawn.
    """
    longest = min(max((len(c) for c in categories), default=0), LABEL_CHARS)
    left, top, row_gap = max(80, int(longest * CHAR_WIDTH) + 12), 24, 8
    k = max(len(series), 1)
    bar_h = 10
    group_h = k * bar_h + row_gap
    height = top + max(len(categories), 1) * group_h + 40
    plot_w = width - left - 70
    vmax = _nice_max(max((v for s in series.values() for v in s), default=0))
    parts = [_header(width, height, title)]
    for i, cat in enumerate(categories):
        y0 = top + i * group_h
        shown = cat if len(cat) <= LABEL_CHARS else cat[:LABEL_CHARS - 1] + "\u2026"
        parts.append(
            f'<text x="{left - 6}" y="{y0 + k * bar_h / 2 + 4:.1f}" text-anchor="end" {FONT}>'
            f"<title>{escape(cat)}</title>{escape(shown)}</text>"
        )
        for j, (name, values) in enumerate(series.items()):
            if values[i] <= 0:
                continue
            w = (math.log10(1 + values[i]) / math.log10(1 + vmax) if log else values[i] / vmax) * plot_w
            y = y0 + j * bar_h
            parts.append(
                f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{bar_h - 1}" '
                f'fill="{series_colour(name, j, colours)}"><title>{escape(cat)} {escape(name)}: '
                f"{values[i]:g}{escape(unit)}</title></rect>"
                f'<text x="{left + w + 3:.1f}" y="{y + bar_h - 2}" {FONT}>{_fmt(values[i])}</text>'
            )
    parts.append(_legend(list(series), left, height - 14, colours))
    parts.append("</svg>")
    return "".join(parts)


def _header(width: int, height: int, title: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{escape(title)}">'
        f'<text x="4" y="14" font-family="sans-serif" font-size="13" font-weight="bold">'
        f"{escape(title)}</text>"
    )


def _y_axis(left: int, top: int, plot_h: int, vmax: float, plot_w: int) -> str:
    out = []
    for i in range(5):
        v = vmax * i / 4
        y = top + plot_h - plot_h * i / 4
        out.append(
            f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e2e8f0"/>'
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{_fmt(v)}</text>'
        )
    return "".join(out)


def _legend(names: Sequence[str], x: int, y: int, colours: Mapping[str, str] | None) -> str:
    out = []
    for i, name in enumerate(names):
        xi = x + i * 110
        out.append(
            f'<rect x="{xi}" y="{y - 9}" width="10" height="10" fill="{series_colour(name, i, colours)}"/>'
            f'<text x="{xi + 14}" y="{y}" {FONT}>{escape(name)}</text>'
        )
    return "".join(out)
