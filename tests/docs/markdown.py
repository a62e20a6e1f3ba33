"""A small reader of the Markdown the repository's docs use, enough to check what GitHub will show:
code fences by CommonMark's rules, headings and the anchors GitHub makes of them, and links.

Not a renderer: it finds fenced code blocks (``` or ~~~, at least three, closed by the same character
at least as many times; inside a list item, closed too when the item ends), ATX and setext headings
outside them, inline links and link definitions outside code. tests/docs/test_markdown.py runs it
over every user-facing Markdown file and plants each defect it reports in a temporary file."""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
ATX_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
SETEXT_UNDERLINE = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
LIST_ITEM = re.compile(r"^(?P<indent> *)(?:[-*+]|\d{1,9}[.)])(?P<gap> +)\S")
# The markers a fence carries on the line just before it: a snippet that must run as it is shown, and
# what the runnable snippet just above it prints.
RUNNABLE_MARKER = "<!-- runnable -->"
OUTPUT_MARKER = "<!-- output -->"
INLINE_LINK = re.compile(r"(?<!\\)!?\[(?P<text>(?:[^\[\]]|\[[^\[\]]*\])*)\]\((?P<target><[^>]*>|[^)\s]*)(?:\s+\"[^\"]*\")?\)")
LINK_DEFINITION = re.compile(r"^ {0,3}\[[^\]]+\]:\s*(?P<target>\S+)")
HTML_LINK = re.compile(r"<a\s[^>]*href=\"(?P<target>[^\"]+)\"", re.IGNORECASE)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
UNESCAPED_PIPE = re.compile(r"(?<!\\)\|")


@dataclass(frozen=True)
class CodeBlock:
    line: int  # 1-based line of the opening fence
    info: str  # the info string's first word: python, bash, ...
    text: str  # the content, the fence's indentation removed
    closed: bool
    marker: str  # the HTML comment on the line just before the fence ("<!-- runnable -->"), or ""
    end_line: int  # the closing fence's line, or the last line the block swallowed
    # Lines inside the block that begin with its fence but cannot close it (text after the fence):
    # the author meant them to close it, and everything after them became code.
    stray: tuple[int, ...] = ()


@dataclass(frozen=True)
class Link:
    line: int
    target: str


@dataclass(frozen=True)
class Snippet:
    doc: Path
    block: CodeBlock
    output: CodeBlock | None  # the OUTPUT_MARKER block right after it, if any

    @property
    def name(self) -> str:
        return f"{self.doc.name}:{self.block.line}"


@dataclass
class Document:
    path: Path
    blocks: list[CodeBlock] = field(default_factory=list)
    headings: list[tuple[int, str]] = field(default_factory=list)  # (line, heading text)
    links: list[Link] = field(default_factory=list)
    html_ids: set[str] = field(default_factory=set)
    # Table rows with a '|' inside a code span: GitHub splits the cell there unless it is written '\|'.
    split_cells: list[tuple[int, str]] = field(default_factory=list)
    prose: list[tuple[int, str]] = field(default_factory=list)  # (line, text) of every line outside code blocks

    @property
    def snippets(self) -> list[Snippet]:
        found = []
        for i, block in enumerate(self.blocks):
            if block.marker == RUNNABLE_MARKER:
                after = self.blocks[i + 1] if i + 1 < len(self.blocks) else None
                found.append(Snippet(self.path, block, after if after and after.marker == OUTPUT_MARKER else None))
        return found

    @property
    def anchors(self) -> set[str]:
        return set(github_anchors([text for _, text in self.headings])) | self.html_ids


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _closes(line: str, fence: str, container: int | None) -> bool:
    # CommonMark: up to three spaces of indentation (relative to the container), the same character
    # at least as many times, nothing after but spaces.
    stripped = line.strip()
    relative = _indent(line) - (container or 0)
    return relative <= 3 and len(stripped) >= len(fence) and set(stripped) == {fence[0]} and (container is None or relative >= 0)


def parse(path: Path, text: str | None = None) -> Document:
    """Read ``path`` (or ``text`` as if it were ``path``)."""
    lines = (path.read_text() if text is None else text).splitlines()
    doc = Document(path)
    item_content: int | None = None  # the content column of the list item being read, if any
    paragraph: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        item = LIST_ITEM.match(line)
        if item:
            item_content = len(item.group("indent")) + 1 + len(item.group("gap"))
            if line.lstrip()[0].isdigit():
                item_content = len(item.group("indent")) + len(line.lstrip().split()[0]) + len(item.group("gap"))
        elif line.strip() and item_content is not None and _indent(line) < item_content and not paragraph:
            item_content = None
        opening = FENCE.match(line)
        if opening and not (opening.group("fence")[0] == "`" and "`" in opening.group("info")):
            indent = len(opening.group("indent"))
            container = item_content if item_content is not None and indent >= item_content else None
            if container is None and indent > 3:
                paragraph.append(line)
                i += 1
                continue
            fence = opening.group("fence")
            body: list[str] = []
            stray: list[int] = []
            j = i + 1
            closed = False
            while j < len(lines):
                candidate = lines[j]
                if _closes(candidate, fence, container):
                    closed = True
                    break
                if candidate.lstrip().startswith(fence):
                    stray.append(j + 1)
                if container is not None and candidate.strip() and _indent(candidate) < container:
                    break  # the list item ends, and the unclosed block with it
                body.append(candidate[min(indent, _indent(candidate)) :])
                j += 1
            before = lines[i - 1].strip() if i > 0 else ""
            marker = before if before.startswith("<!--") and before.endswith("-->") else ""
            info = opening.group("info").strip().split(" ")[0] if opening.group("info").strip() else ""
            # (j: the closing line's index, or the index of the first line after the block)
            doc.blocks.append(CodeBlock(i + 1, info, "\n".join(body) + "\n", closed, marker, j + 1 if closed else j, tuple(stray)))
            paragraph = []
            i = j + 1 if closed else j
            continue
        doc.prose.append((i + 1, line))
        heading = ATX_HEADING.match(line)
        if heading and _indent(line) <= 3:
            doc.headings.append((i + 1, (heading.group(2) or "").strip()))
            paragraph = []
        elif SETEXT_UNDERLINE.match(line) and paragraph and not (line.strip().startswith("-") and len(paragraph) == 0):
            if not LIST_ITEM.match(paragraph[0]) and not paragraph[0].lstrip().startswith(("|", ">")):
                doc.headings.append((i + 1, " ".join(p.strip() for p in paragraph)))
            paragraph = []
        elif not line.strip():
            paragraph = []
        else:
            paragraph.append(line)
            _links(doc, i + 1, line, paragraph[-2] if len(paragraph) > 1 else None)
            if line.lstrip().startswith("|"):
                doc.split_cells += [(i + 1, span.group(0)) for span in CODE_SPAN.finditer(line) if UNESCAPED_PIPE.search(span.group(0))]
        i += 1
    return doc


def _links(doc: Document, number: int, line: str, previous: str | None = None) -> None:
    outside_code = CODE_SPAN.sub("", line)
    for match in INLINE_LINK.finditer(outside_code):
        doc.links.append(Link(number, match.group("target").strip("<>")))
    if previous is not None:  # a link whose text breaks across the two lines: "[Running a\ndrill](…)"
        before = CODE_SPAN.sub("", previous)
        joined = f"{before}\n{outside_code}"
        for match in INLINE_LINK.finditer(joined):
            if match.start() < len(before) < match.end() - 1:
                doc.links.append(Link(number - 1, match.group("target").strip("<>")))
    definition = LINK_DEFINITION.match(outside_code)
    if definition:
        doc.links.append(Link(number, definition.group("target").strip("<>")))
    for match in HTML_LINK.finditer(outside_code):
        doc.links.append(Link(number, match.group("target")))
    for match in re.finditer(r"<a\s[^>]*(?:name|id)=\"([^\"]+)\"", outside_code, re.IGNORECASE):
        doc.html_ids.add(match.group(1))


def heading_text(markdown: str) -> str:
    """What GitHub shows of a heading: code spans' content, links' text, no emphasis markers."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    parts = re.split(r"(`+[^`]*`+)", text)
    shown = []
    for part in parts:
        if part.startswith("`"):
            shown.append(part.strip("`"))
        else:
            part = re.sub(r"<[^>]+>", "", part)
            part = re.sub(r"(\*{1,3}|(?<!\w)_{1,3}|_{1,3}(?!\w))", "", part)
            shown.append(part)
    return "".join(shown)


def github_slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase; every character but letters, marks, numbers,
    connector punctuation ('_'), spaces and '-' dropped; each space a '-'."""
    text = heading_text(heading).strip().lower()
    kept = "".join(c for c in text if c in " -" or unicodedata.category(c)[0] in "LMN" or unicodedata.category(c) == "Pc")
    return kept.replace(" ", "-")


def github_anchors(headings: list[str]) -> list[str]:
    """Each heading's anchor in order; a repeated one gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    anchors = []
    for heading in headings:
        slug = github_slug(heading)
        if slug in seen:
            seen[slug] += 1
            anchors.append(f"{slug}-{seen[slug]}")
        else:
            seen[slug] = 0
            anchors.append(slug)
    return anchors


def unclosed_fences(doc: Document) -> list[str]:
    """Fences that never close, and fences meant to close that cannot (text after them), each with the
    lines it turns into one code block."""
    problems = []
    for block in doc.blocks:
        if not block.closed:
            swallowed = f"lines {block.line}-{block.end_line} become one code block"
            problems.append(f"{doc.path.name}:{block.line}: code fence never closes ({swallowed})")
        for line in block.stray:
            problems.append(
                f"{doc.path.name}:{line}: a fence with text after it cannot close the code block of line {block.line} "
                f"(lines {block.line}-{block.end_line} become one code block): put the text on its own line"
            )
    return problems


def unclosed_comments(doc: Document) -> list[str]:
    """HTML comments outside code that never end: GitHub hides everything after them."""
    problems, opened = [], None
    for line, text in doc.prose:
        position = 0
        while True:
            if opened is None:
                start = text.find("<!--", position)
                if start < 0:
                    break
                opened, position = line, start + 4
            end = text.find("-->", position)
            if end < 0:
                break
            opened, position = None, end + 3
    if opened is not None:
        problems.append(f"{doc.path.name}:{opened}: an HTML comment never ends ('-->'): GitHub hides the rest of the page")
    return problems


# What GitHub keeps of raw HTML in Markdown; any other tag (a placeholder like <name>) is dropped, text and all.
KEPT_TAGS = frozenset(
    {"a", "b", "br", "code", "details", "div", "em", "hr", "i", "img", "kbd", "li", "ol", "p", "pre", "span", "strong", "sub"}
    | {"summary", "sup", "table", "td", "th", "tr", "ul"}
)
HTML_TAG = re.compile(r"(?<!\\)</?([A-Za-z][A-Za-z0-9-]*)(?:\s[^<>]*)?/?>")
MULTILINE_CODE_SPAN = re.compile(r"(`+)(?:(?!\1)[\s\S])+?\1")


def _paragraphs(doc: Document) -> list[list[tuple[int, str]]]:
    """Runs of consecutive non-blank lines outside code blocks."""
    found: list[list[tuple[int, str]]] = []
    for line, text in doc.prose:
        if not text.strip():
            continue
        if found and found[-1][-1][0] == line - 1:
            found[-1].append((line, text))
        else:
            found.append([(line, text)])
    return found


def dropped_placeholders(doc: Document) -> list[str]:
    """``<name>`` outside code: GitHub takes it for an HTML tag it does not allow and shows nothing."""
    problems = []
    for paragraph in _paragraphs(doc):
        joined = "\n".join(text for _, text in paragraph)
        # (code spans may break across lines; blanked, keeping the line breaks for the line numbers)
        outside = MULTILINE_CODE_SPAN.sub(lambda span: re.sub(r"[^\n]", " ", span.group(0)), joined)
        outside = re.sub(r"<!--[\s\S]*?-->", "", outside)
        for tag in HTML_TAG.finditer(outside):
            if tag.group(1).lower() not in KEPT_TAGS:
                line = paragraph[0][0] + outside[: tag.start()].count("\n")
                problems.append(f"{doc.path.name}:{line}: {tag.group(0)} is dropped on GitHub (an HTML tag): put it in `code` or write \\<")
    return problems


def split_table_cells(doc: Document) -> list[str]:
    return [f"{doc.path.name}:{line}: the '|' in {span} ends the table cell on GitHub: write it '\\|'" for line, span in doc.split_cells]


EXTERNAL = re.compile(r"^[a-z][a-z0-9+.-]*:", re.IGNORECASE)


def dead_links(doc: Document, root: Path, read: dict[Path, Document] | None = None) -> list[str]:
    """Relative links whose file is missing, and anchors (here or in another Markdown file) no heading makes."""
    read = {} if read is None else read
    problems = []
    for link in doc.links:
        target = link.target
        if not target or EXTERNAL.match(target):
            continue
        path_part, _, anchor = target.partition("#")
        where = doc.path if not path_part else (doc.path.parent / path_part).resolve()
        if path_part and not where.exists():
            problems.append(f"{doc.path.name}:{link.line}: link to {target}: no file {path_part}")
            continue
        if not anchor or where.suffix != ".md":
            continue
        if not str(where.resolve()).startswith(str(root.resolve())):
            continue
        if where == doc.path:
            other = doc
        else:
            if where not in read:
                read[where] = parse(where)
            other = read[where]
        if anchor not in other.anchors:
            problems.append(f"{doc.path.name}:{link.line}: link to {target}: no heading in {where.name} makes #{anchor}")
    return problems
