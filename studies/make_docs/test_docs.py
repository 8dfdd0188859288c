"""The README and docs/ say what the records in results/ say.

Each study's markdown report is rewritten from its record and compared with the committed one;
each generated block of README.md and docs/*.md is rewritten from the reports and records and
compared; docs/bad_input.md is made again by running its cases.  A failure names the command
that brings the file up to date.
"""
import json
import re

import pytest

from studies.classifier_study import classifier_study
from studies.common.paths import RESULTS, ROOT
from studies.common.reports import load_cells
from studies.feature_source import feature_source
from studies.make_docs import bad_input, tables
from studies.phrase_topics import measure as phrase_topics
from studies.prior_share import prior_share
from studies.prior_study import prior_study
from studies.table2 import table2
from studies.token_count import token_count
from studies.transductive import transductive
from studies.vocab_ties import vocab_ties

#: study -> (the function writing its report from its record, the record's file name)
REPORTS = {
    "table2": (table2.report_text, "table2.json"),
    "token_count": (token_count.report_text, "token_count.json"),
    "prior_study": (prior_study.report_text, "prior_study.json"),
    "prior_share": (prior_share.report_text, "prior_share.json"),
    "feature_source": (feature_source.report_text, "feature_source.json"),
    "transductive": (transductive.report_text, "transductive.json"),
    "vocab_ties": (vocab_ties.report, "vocab_ties.json"),
    "classifier_study": (classifier_study.report_text, "classifier_study.json"),
    "phrase_topics": (phrase_topics.report_text, "measure.json"),
}
DOC_PAGES = ["README.md", "studies/README.md", *sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "docs").glob("*.md"))]


@pytest.mark.parametrize("study", sorted(REPORTS))
def test_study_report_is_its_record(study):
    write, record_name = REPORTS[study]
    record = load_cells(RESULTS / study / record_name)
    report = (RESULTS / study / record_name).with_suffix(".md")
    assert write(record) == report.read_text(), (
        f"{report.relative_to(ROOT)} differs from its record: write it again with the report "
        f"function of studies/{study}/{study}.py")


@pytest.mark.parametrize("page", sorted(tables.TARGETS))
def test_generated_blocks_are_current(page):
    assert tables.render(page) == (ROOT / page).read_text(), (
        f"{page}: a generated block is stale; run python -m studies.make_docs.tables")


def test_every_page_has_its_blocks():
    """A block that lost a marker would silently stop being checked."""
    for page, blocks in tables.TARGETS.items():
        text = (ROOT / page).read_text()
        for name in blocks:
            assert text.count(f"<!-- {name} -->") == 1 and text.count(f"<!-- /{name} -->") == 1, (page, name)


def test_bad_input_table_is_current():
    assert bad_input.table_text() == (ROOT / "docs" / "bad_input.md").read_text(), (
        "docs/bad_input.md is stale: run python -m studies.make_docs.bad_input")


def test_readme_is_short_and_links_the_docs():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    for page in ("results", "speed", "explaining", "sampler", "architecture"):
        assert f"(docs/{page}.md)" in readme


@pytest.mark.parametrize("page", DOC_PAGES)
def test_links_and_cited_records_exist(page):
    """Every relative link, image and cited ``results/...`` or ``studies/...`` path of a page
    names a file that exists, so each number's record can be found."""
    text = (ROOT / page).read_text()
    base = (ROOT / page).parent
    targets = [m for m in re.findall(r"\]\(([^)#\s]+)", text) if "://" not in m]
    missing = [m for m in targets if not (base / m).exists()]
    cited = set(re.findall(r"\b((?:results|studies)/[\w./-]+\.(?:json|md|png|py|txt|sh))", text))
    missing += [path for path in cited if not (ROOT / path).exists()]
    assert not missing, f"{page}: {missing}"


def test_headline_numbers_are_table2_cells():
    """The README's best cells are the best means of the authors'-protocol rows of Table 2."""
    cells = json.loads((RESULTS / "table2" / "table2.json").read_text())["cells"]
    groups = tables.table2_groups()
    assert groups and sum(len(acc) for acc in groups.values()) <= sum(len(c["seeds"]) for c in cells.values())
    for dataset in tables.DATASETS:
        key, mean, _, n = tables.best(groups, dataset, {"cpgbn"})
        assert n >= 3 and key[1] == "cpgbn"
        rivals = [sum(acc) / len(acc) for k, acc in groups.items()
                  if k[0] == dataset and k[1] == "cpgbn" and len(acc) >= 3]
        assert mean == max(rivals)
        assert f"| {dataset.upper()} | {mean:.1f} +- " in (ROOT / "README.md").read_text()
