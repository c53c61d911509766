"""The Methods section as text: HTML for report.html, Markdown for a notebook."""

from __future__ import annotations

import html

import xarray as xr

from commlens.report.methods.facts import NOT_RECORDED
from commlens.report.methods.sections import methods


def methods_html(ds: xr.Dataset) -> str:
    parts = ["<h2 id='methods'>Methods</h2><p class='caption'>How these numbers were measured and analysed, "
             f"stated from the dataset alone; what it does not hold is marked &quot;{NOT_RECORDED}&quot;.</p>"]
    for section in methods(ds):
        parts.append(f"<h3>{html.escape(section.heading)}</h3>")
        parts += [f"<p>{html.escape(paragraph)}</p>" for paragraph in section.paragraphs]
        if section.items:
            parts.append("<ul>" + "".join(f"<li>{html.escape(item)}</li>" for item in section.items) + "</ul>")
    return "".join(parts)


def methods_markdown(ds: xr.Dataset) -> str:
    """The same for a notebook (IPython.display.Markdown)."""
    parts = ["## Methods"]
    for section in methods(ds):
        parts += [f"### {section.heading}", *section.paragraphs]
        if section.items:
            parts.append("\n".join(f"- {item}" for item in section.items))
    return "\n\n".join(parts)
