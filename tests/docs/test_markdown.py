"""The repository's Markdown renders on GitHub as written: every code fence closes, every relative link
and anchor leads somewhere, every snippet marked runnable runs (and prints what the doc says), and
user docs speak of the product, not of the tracker it was built from. Each check is shown to catch its
defect in a file planted for it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.docs import snippets
from tests.docs.markdown import (
    Document,
    dead_links,
    dropped_placeholders,
    github_anchors,
    github_slug,
    parse,
    split_table_cells,
    unclosed_comments,
    unclosed_fences,
)

# A log of decisions names the issues it decided them in: only the issue-number rule spares it.
HISTORY = ROOT / "docs" / "decisions.md"


def _markdown_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / name for name in listed]


DOCS = {path: parse(path) for path in _markdown_files()}
SNIPPETS = [snippet for doc in DOCS.values() for snippet in doc.snippets]


def _doc(tmp_path: Path, text: str, name: str = "page.md") -> Document:
    path = tmp_path / name
    path.write_text(text)
    return parse(path)


# --- the repository's docs -------------------------------------------------------------------------


def test_the_docs_are_read_including_the_readme_and_every_page_under_docs() -> None:
    names = {str(path.relative_to(ROOT)) for path in DOCS}
    assert {"README.md", "docs/runbook.md", "docs/checkpoint-manifest.md"} <= names
    assert all(str(path.relative_to(ROOT)) in names for path in (ROOT / "docs").glob("*.md"))


def test_every_code_fence_in_the_docs_closes_where_it_is_meant_to() -> None:
    assert [problem for doc in DOCS.values() for problem in unclosed_fences(doc)] == []


def test_every_html_comment_in_the_docs_ends() -> None:
    assert [problem for doc in DOCS.values() for problem in unclosed_comments(doc)] == []


def test_given_an_html_comment_that_never_ends_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "<!-- runnable -->\n```\n<!-- in code\n```\n\nText <!-- a note\nthat goes on\n\n## Hidden\n")
    assert unclosed_comments(doc) == ["page.md:6: an HTML comment never ends ('-->'): GitHub hides the rest of the page"]


def test_no_placeholder_in_the_docs_is_taken_for_html() -> None:
    assert [problem for doc in DOCS.values() for problem in dropped_placeholders(doc)] == []


def test_given_a_placeholder_in_angle_brackets_outside_code_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    text = "Run `make arm STACK=<STACK>`, or `waiting on\n<STACK>` <br> <!-- a <note> -->.\nA Workload <name> was deleted; \\<kept>.\n"
    assert dropped_placeholders(_doc(tmp_path, text)) == [
        "page.md:3: <name> is dropped on GitHub (an HTML tag): put it in `code` or write \\<"
    ]


def test_no_table_cell_of_the_docs_is_split_by_a_pipe_in_its_code() -> None:
    assert [problem for doc in DOCS.values() for problem in split_table_cells(doc)] == []


def test_every_relative_link_and_anchor_in_the_docs_resolves() -> None:
    assert [problem for doc in DOCS.values() for problem in dead_links(doc, ROOT, dict(DOCS))] == []


def test_the_checkpoint_snippets_and_the_offline_walkthrough_are_marked_runnable() -> None:
    marked = {(snippet.doc.name, snippet.block.info) for snippet in SNIPPETS}
    assert {("README.md", "python"), ("checkpoint-manifest.md", "python"), ("progress.md", "python")} <= marked
    python_blocks = [block for doc in DOCS.values() for block in doc.blocks if block.info == "python" and doc.path != HISTORY]
    assert sum(1 for snippet in SNIPPETS if snippet.block.info == "python") == len(python_blocks), "every Python snippet runs"
    assert any(snippet.block.info == "bash" and snippet.output is not None for snippet in SNIPPETS)


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.block.info == "python"], ids=lambda s: s.name)
def test_a_runnable_python_snippet_runs_as_a_job_and_again_as_its_resubmission(snippet: snippets.Snippet) -> None:
    assert snippets.python_problem(snippet.block.text, snippet.name) is None


@pytest.mark.parametrize("snippet", [s for s in SNIPPETS if s.block.info == "bash"], ids=lambda s: s.name)
def test_a_runnable_shell_snippet_runs_offline_and_prints_what_the_doc_shows(snippet: snippets.Snippet) -> None:
    assert snippets.shell_problem(snippet, ROOT) is None


def test_every_runnable_snippet_is_of_a_language_the_docs_test_runs() -> None:
    assert [snippet.name for snippet in SNIPPETS if snippet.block.info not in ("python", "bash")] == []


# A page's section the code sends a reader to (a notification's "Runbook: docs/runbook.md#…").
CODE_ANCHOR = re.compile(r"\b((?:docs/[\w-]+|README)\.md)#([\w-]+)")


def test_every_docs_section_the_code_points_a_reader_to_exists() -> None:
    listed = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    pointed = {
        (name, page, anchor)
        for name in listed
        if not name.startswith("tests/")
        for page, anchor in CODE_ANCHOR.findall((ROOT / name).read_text())
    }
    assert pointed, "the notifications point to runbook sections: this test reads them"
    assert [f"{name}: {page}#{anchor}" for name, page, anchor in sorted(pointed) if anchor not in DOCS[ROOT / page].anchors] == []


# Internal tracker references and notes outside the repository, in any user doc (code blocks too).
TRACKER = re.compile(
    r"\bissues? \d+|\bissue #\d+|\b(?:PR|pull request) #?\d+|(?<![\w&/.)\]-])#\d+\b|research note|\.\./shared/", re.IGNORECASE
)


def tracker_references(doc: Document, text: str) -> list[str]:
    return [
        f"{doc.path.name}:{number}: {match.group(0)!r}"
        for number, line in enumerate(text.splitlines(), 1)
        for match in TRACKER.finditer(line)
    ]


def test_user_docs_say_the_fact_not_the_issue_number_or_a_note_outside_the_repository() -> None:
    found = [problem for path, doc in DOCS.items() if path != HISTORY for problem in tracker_references(doc, path.read_text())]
    assert found == []


# --- each check catches its defect ------------------------------------------------------------------


def test_given_a_fence_never_closed_when_checked_then_it_names_the_lines_it_swallows(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "# Title\n\n```bash\nmake drill\n\n## Next section\n")
    assert unclosed_fences(doc) == ["page.md:3: code fence never closes (lines 3-6 become one code block)"]


def test_given_a_closing_fence_with_text_after_it_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "```bash\nmake drill\n``` Locally, more prose\n\n## Section\n\n```\nx\n```\n")
    problems = unclosed_fences(doc)
    assert problems and problems[0].startswith("page.md:3: a fence with text after it cannot close the code block of line 1")


def test_given_a_fence_in_a_list_item_never_closed_when_the_item_ends_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "1. Run:\n\n   ```bash\n   make setup\n\nNext paragraph.\n")
    assert unclosed_fences(doc) == ["page.md:3: code fence never closes (lines 3-5 become one code block)"]


def test_given_fences_that_close_by_commonmark_rules_when_checked_then_nothing_is_reported(tmp_path: Path) -> None:
    text = "````markdown\n```python\nx = 1\n```\n````\n\n~~~\n```\n~~~~\n\n1. Step:\n\n   ```bash\n   make\n   ```\n"
    doc = _doc(tmp_path, text)
    assert unclosed_fences(doc) == [] and len(doc.blocks) == 3


def test_given_a_pipe_in_a_table_cells_code_when_checked_then_only_the_unescaped_one_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "| a | b |\n|---|---|\n| `x \\| y` | `status|reset` |\n\n`a|b` outside a table\n")
    assert split_table_cells(doc) == ["page.md:3: the '|' in `status|reset` ends the table cell on GitHub: write it '\\|'"]


def test_given_a_link_to_a_missing_file_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "# A\n\nSee [the spec](missing.md) and [a site](https://example.com/x.md).\n")
    assert dead_links(doc, tmp_path) == ["page.md:3: link to missing.md: no file missing.md"]


def test_given_a_link_to_an_anchor_no_heading_makes_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    _doc(tmp_path, "# Other\n\n## Elastic jobs on Slurm: shrink, then grow back\n", name="other.md")
    links = "[ok](other.md#elastic-jobs-on-slurm-shrink-then-grow-back) [gone](other.md#elastic) [here](#a) [nope](#b)"
    doc = _doc(tmp_path, f"# A\n\n{links}\n")
    assert dead_links(doc, tmp_path) == [
        "page.md:3: link to other.md#elastic: no heading in other.md makes #elastic",
        "page.md:3: link to #b: no heading in page.md makes #b",
    ]


def test_given_a_dead_link_whose_text_breaks_across_two_lines_when_checked_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "# A\n\nThe runbook's [Running a\ndrill](#running-a-drill) has the options.\n")
    assert dead_links(doc, tmp_path) == ["page.md:3: link to #running-a-drill: no heading in page.md makes #running-a-drill"]


def test_given_a_heading_inside_a_code_block_when_linked_to_then_the_anchor_is_dead(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "# A\n\n```\n## Not a heading\n```\n\n[x](#not-a-heading)\n")
    assert dead_links(doc, tmp_path) == ["page.md:7: link to #not-a-heading: no heading in page.md makes #not-a-heading"]


def test_given_a_link_in_a_code_span_when_checked_then_it_is_not_a_link(tmp_path: Path) -> None:
    assert dead_links(_doc(tmp_path, "Write `[x](missing.md)` to link.\n"), tmp_path) == []


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("At 2 a.m.: the operator's page", "at-2-am-the-operators-page"),
        ("When a job runs again: `ResumePolicy`", "when-a-job-runs-again-resumepolicy"),
        ("Real Slurm (`make drill SLURM=real`)", "real-slurm-make-drill-slurmreal"),
        ("Versions: v1 and v1.1", "versions-v1-and-v11"),
        ("The **bold** and _emphasis_ of it", "the-bold-and-emphasis-of-it"),
        ("snake_case_name stays", "snake_case_name-stays"),
        ("Ünïcode café", "ünïcode-café"),
    ],
)
def test_a_heading_s_anchor_is_github_s(heading: str, anchor: str) -> None:
    assert github_slug(heading) == anchor


def test_repeated_headings_get_numbered_anchors_as_on_github() -> None:
    assert github_anchors(["Slack", "Setup", "Setup", "Setup"]) == ["slack", "setup", "setup-1", "setup-2"]


def test_given_a_snippet_using_a_name_it_never_imported_when_run_then_the_error_is_reported() -> None:
    code = "from hyperpod_recovery.checkpointing import Checkpoints\ncheckpoints = Checkpoints('s3://my-bucket/run')\ndcp.save({})\n"
    problem = snippets.python_problem(code, "page.md:7")
    assert problem == "page.md:7, run 1 of 2: NameError: name 'dcp' is not defined (line 3 of the snippet)"


def test_given_a_snippet_that_resumes_at_its_checkpoints_own_step_when_run_again_then_it_is_reported() -> None:
    # The job, then its resubmission: starting again at the saved step re-saves into a committed folder.
    readme = next(s for s in SNIPPETS if s.doc.name == "README.md" and s.block.info == "python").block.text
    repeated = readme.replace("start = resume.step + 1", "start = resume.step")
    assert repeated != readme
    problem = snippets.python_problem(repeated, "README.md")
    assert problem is not None and problem.startswith("README.md, run 2 of 2: CommittedCheckpointOverwritten")


def test_given_a_shell_snippet_whose_output_differs_from_the_doc_when_run_then_it_is_reported(tmp_path: Path) -> None:
    doc = _doc(tmp_path, "<!-- runnable -->\n```bash\necho one\n```\n\n<!-- output -->\n```\ntwo\n```\n")
    [snippet] = doc.snippets
    assert snippets.shell_problem(snippet, tmp_path) == "page.md:2: prints what its output block (line 7) does not show:\none\n"


def test_given_a_shell_snippet_that_fails_when_run_then_its_exit_code_is_reported(tmp_path: Path) -> None:
    [snippet] = _doc(tmp_path, "<!-- runnable -->\n```bash\nfalse\n```\n").snippets
    assert snippets.shell_problem(snippet, tmp_path) == "page.md:2: exit code 1; it printed:\n"


def test_given_issue_numbers_and_outside_notes_in_a_doc_when_checked_then_each_is_reported(tmp_path: Path) -> None:
    text = (
        "Shrink (issue 33) as in #41 and PR 7; the research note says so; see ../shared/reference/x.md.\n"
        "A &#35;1 entity and a.md#L10 are not.\n"
    )
    doc = _doc(tmp_path, text)
    assert tracker_references(doc, text) == [
        "page.md:1: 'issue 33'",
        "page.md:1: '#41'",
        "page.md:1: 'PR 7'",
        "page.md:1: 'research note'",
        "page.md:1: '../shared/'",
    ]


# A count of the drills goes stale with the next scenario: one the docs state is the folder's.
DRILL_COUNT = re.compile(r"\b(\d+) (?:drills|drill scenarios|scenarios)\b(?! started)")  # (the intake line counts drill requests)
SCENARIOS = ROOT / "events" / "drills"


def stated_drill_counts(text: str) -> list[int]:
    return [int(number) for number in DRILL_COUNT.findall(text)]


def test_a_number_of_drills_the_docs_or_the_newcomer_run_state_is_the_number_of_scenarios() -> None:
    texts = [path.read_text() for path in DOCS if path != HISTORY] + [(ROOT / "tools" / "newcomer_run.sh").read_text()]
    scenarios = len(list(SCENARIOS.glob("*.json")))
    assert [count for text in texts for count in stated_drill_counts(text) if count != scenarios] == []


def test_given_a_stated_count_of_drills_when_read_then_it_is_found() -> None:
    assert stated_drill_counts("About 8 minutes (the project's 47 drills are most of it); 3 scenarios.") == [47, 3]
