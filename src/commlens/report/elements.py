"""What the report is made of: a Figure (built once per plotting backend), a Table, and a Skipped
figure or table that says what the dataset lacks."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd


@dataclass
class Figure:
    name: str          # file stem under figures/
    title: str
    caption: str
    build: Callable[..., Any]   # () -> HoloViews object, called once per backend (its defaults bind a loop's values)
    panels: int = 1    # small multiples: what drawing it costs grows with them
    page: str = ""     # the report page it belongs on (see figures.PAGES); "" the first page
    # The (library, placement, kernel) curves it draws against size, time and bandwidth: every measured
    # curve is drawn so somewhere (figures.every_curve draws those no other figure does).
    curves: frozenset = frozenset()


@dataclass
class Skipped:
    name: str
    title: str
    reason: str


@dataclass
class Table:
    name: str
    title: str
    caption: str
    frame: pd.DataFrame      # numbers as numbers (us, MB/s, ratios: the column names say which)

    def readable(self) -> pd.DataFrame:
        """The frame as the report and notebooks show it: every number of a float column with the same
        significant figures and no exponent (commlens.units.format_number), missing values empty."""
        return readable(self.frame)


def readable(frame: pd.DataFrame) -> pd.DataFrame:
    """`frame` with its float columns as text (commlens.units.format_number): '10680' beside '1590'; p and
    q values in scientific notation below 1e-3 (commlens.units.format_probability)."""
    from commlens.units import format_number, format_probability

    shown = frame.copy()
    for column in shown.columns:
        if pd.api.types.is_float_dtype(shown[column]):
            probability = str(column).split(" ")[0] in PROBABILITIES
            shown[column] = shown[column].map(format_probability if probability else format_number)
    return shown


# Columns that hold p or q values, by the first word of their name.
PROBABILITIES = ("p", "q", "p_value", "q_value")
