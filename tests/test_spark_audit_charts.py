"""The report's inline SVG charts (spark_audit/charts.py): labels fit, zero bars are not drawn."""
from __future__ import annotations

import re

from spark_audit.charts import CHAR_WIDTH, LABEL_CHARS, grouped_bars

LONG = "payload is not valid UTF-8 for TextMessage (byte 0xff at offset 1234 of 5678)"


def label_x(svg: str) -> float:
    return float(re.search(r'<text x="([0-9.]+)" y="[0-9.]+" text-anchor="end"', svg).group(1))


def test_the_label_column_fits_the_longest_reason_and_shortens_longer_ones():
    svg = grouped_bars(["backout threshold 3 exceeded", LONG], {"failed": [0, 3], "backout": [2, 0]}, "Failures")
    assert label_x(svg) >= LABEL_CHARS * CHAR_WIDTH  # room for LABEL_CHARS characters left of the bars
    shown = LONG[:LABEL_CHARS - 1] + "\u2026"
    assert f"<title>{LONG}</title>{shown}</text>" in svg  # the whole reason as the tooltip
    assert ">backout threshold 3 exceeded</text>" in svg
    # Zero bars are not drawn: one bar (and one value label) per non-zero value.
    assert svg.count("<rect") - 2 == 2  # two legend swatches
    assert not re.search(r">0</text>", svg)


def test_short_labels_keep_a_narrow_label_column():
    narrow = label_x(grouped_bars(["a", "b"], {"p50": [1, 2]}, "Latency"))
    wide = label_x(grouped_bars(["sensors-to-mq-with-a-long-route-name"], {"p50": [1]}, "Latency"))
    assert 60 <= narrow < wide
