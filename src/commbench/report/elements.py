"""What the report is made of: a Figure (built once per plotting backend), a Table, and a Skipped
figure or table that says what the dataset lacks."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd


@dataclass
class Figure:
    name: str          # file stem under figures/
    title: str
    caption: str
    build: object      # () -> HoloViews object, called once per backend
    panels: int = 1    # small multiples: what drawing it costs grows with them
    page: str = ""     # the report page it belongs on (see figures.PAGES); "" the first page


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
    frame: pd.DataFrame
