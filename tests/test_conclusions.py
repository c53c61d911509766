"""What the report opens with: a title that says what was measured on what, conclusions generated from the
analysis and linked to their evidence, words that fit what the campaign declared, and the checks a reader
makes before trusting a number."""

import time

import pytest

from commlens.data import synthetic as syn
from commlens.report.analysis_table import ReportData
from commlens.report.comparison_sections import comparison_sections
from commlens.report.conclusions import conclusions, report_title
from commlens.report.glance import at_a_glance
from commlens.report.sanity import sanity_flags

from test_compare_report import AFTER, BEFORE, as_collected, curve, two_libraries

GRID = syn.powers_of_two(1, 1 << 20)
SWITCHED = syn.GroundTruth(1e-6, 5e9, switches=(syn.Switch(16384, 6e-6, 8e9),))
NOISE = syn.Noise(relative=0.01, tail_df=3, outlier_fraction=0.01, launch_relative=0.02, launch_point_relative=0.005)


def opening(ds):
    data = ReportData(ds, n_boot=20)
    sections, _ = comparison_sections(data)
    return data, conclusions(data, at_a_glance(data), sections)


def test_the_title_says_what_was_measured_on_what():
    data = ReportData(two_libraries(placements=("1N2P", "2N1P")), n_boot=20)
    title = report_title(data)
    assert title.startswith(f"MPICH {BEFORE.split('-')[1]} and MPICH {AFTER.split('-')[1]}, ")
    assert "on one node and between two nodes (emulated on one host)" in title and title.endswith("1 B to 1 MiB")


def test_conclusions_name_the_switch_found_and_link_to_the_findings():
    curves = {(library, "1N2P", "pingpong.send"): syn.generate(GRID, SWITCHED, NOISE, 30, 3, seed=seed)
              for seed, library in enumerate((BEFORE, AFTER))}
    data, found = opening(as_collected(syn.campaign_dataset(curves)))
    switches = [c for c in found if "protocol switch at 16 KiB" in c.text]
    assert len(switches) == 2 and all(c.evidence == "findings" for c in switches), [c.text for c in found]
    assert all("in 3 of 3 launches" in c.text for c in switches)
    headline = [c for c in found if c.evidence == "at-a-glance"]
    assert len(headline) == 2 and all(" us" in c.text and "MB/s" in c.text for c in headline)


def test_an_update_reads_as_what_changed_and_two_libraries_as_how_they_differ():
    plain = opening(two_libraries())[1]
    declared = opening(two_libraries(config={"campaign": "synthetic",
                                             "compare": [{"baseline": BEFORE, "candidate": AFTER}]}))[1]
    [differ] = [c for c in plain if c.evidence.startswith("compare-")]
    [update] = [c for c in declared if c.evidence.startswith("compare-")]
    assert "(regressed" not in differ.text and "x slower (slower" in differ.text, differ.text
    assert "x slower (regressed" in update.text or "x slower (slower, by" in update.text, update.text


def test_a_variant_faster_than_its_plain_kernel_and_one_sample_points_are_flagged():
    truth = syn.GroundTruth(2e-6, 5e9)
    curves = {("lib", "1N2P", "pingpong.send"): curve(1),
              ("lib", "1N2P", "pingpong.send@integrity"): syn.generate(GRID, syn.GroundTruth(0.5e-6, 5e9), NOISE, 30, 3,
                                                                       seed=2)}
    flags = sanity_flags(ReportData(as_collected(syn.campaign_dataset(curves)), n_boot=20))
    assert any(flag.startswith("lib 1N2P: pingpong.send@integrity reads ") and "faster than plain pingpong.send" in flag
               for flag in flags), flags
    one = {("lib", "1N2P", "pingpong.send"): syn.generate(GRID, truth, NOISE, 1, 2, seed=3)}
    flags = sanity_flags(ReportData(as_collected(syn.campaign_dataset(one)), n_boot=20))
    assert any("rest on one sample" in flag for flag in flags), flags
    assert sanity_flags(ReportData(as_collected(syn.campaign_dataset({("lib", "1N2P", "pingpong.send"): curve(4)})),
                                   n_boot=20)) == []


def test_the_report_opens_with_its_conclusions_and_closes_with_methods(tmp_path):
    from commlens.report.document import write_report

    write_report(ReportData(two_libraries(), n_boot=20), tmp_path)
    page = (tmp_path / "report.html").read_text()
    order = [page.index(anchor) for anchor in ("id='conclusions'", "id='at-a-glance'", "id='figures'",
                                               "id='what-changed'", "id='appendix'", "<h2>Provenance</h2>")]
    assert order == sorted(order)
    assert page.count("class='evidence'") >= 3
    assert all(f"href='#{target}'" in page for target in ("at-a-glance", f"compare-{BEFORE}-{AFTER}"))


MARKS = """
const views = typeof Bokeh === 'undefined' ? [] :
    (Bokeh.index.values ? [...Bokeh.index.values()] : Object.values(Bokeh.index));
const found = {spans: 0, fits: 0, idle: views.length > 0 && views.every(v => v.is_idle !== false)};
const walk = (view) => {
  if (view.model.type === 'Span' && view.el) found.spans += 1;
  if (view.model.type === 'GlyphRenderer' && view.model.glyph.type === 'Line') {
    const dash = view.model.glyph.line_dash;
    const value = dash && dash.value !== undefined ? dash.value : dash;
    if (value && value !== 'solid' && value.length) found.fits += 1;
  }
  for (const child of (view.child_views || [])) walk(child);
  if (view.renderer_views) for (const child of view.renderer_views.values()) walk(child);
};
views.forEach(walk);
return found;
"""


@pytest.mark.browser
def test_the_figures_mark_the_switch_found_where_it_is_in_a_browser(tmp_path):
    """Two libraries with a switch at 16 KiB: the library comparison marks it on both panels (time and
    bandwidth), and draws each curve's fitted regimes, as headless Chromium renders the report."""
    from commlens.report.document import write_report
    from test_report import browser

    curves = {(library, "1N2P", "pingpong.send"): syn.generate(GRID, SWITCHED, NOISE, 30, 3, seed=seed)
              for seed, library in enumerate((BEFORE, AFTER))}
    manifest = write_report(ReportData(as_collected(syn.campaign_dataset(curves)), n_boot=20), tmp_path)
    assert "library-comparison-1N2P" in [figure["name"] for figure in manifest["figures"]]
    with browser() as driver:
        driver.get((tmp_path / "report.html").resolve().as_uri())
        found = None
        for _ in range(120):
            found = driver.execute_script(MARKS)
            if found["idle"] and found["spans"]:
                break
            time.sleep(0.5)
        errors = [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    assert not errors, errors
    # One switch mark on each of the two panels; a dotted fitted-regimes line per library on each panel.
    assert found["spans"] >= 2 and found["fits"] >= 4, found
