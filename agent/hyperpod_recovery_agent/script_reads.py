"""Whether a shell batch script may read the arguments it was given (Slurm 23.02+ no longer report them,
so a copy would run without them): where it may, the line that does.

Looked for: ``$1``..., ``${1...}``, ``$@``, ``$*``, ``$#`` (not ``${#var}``, a length), ``${@...}``,
``${#}``, ``${!1}``/``${!#}`` (indirect: the last argument), ``for name; do`` and ``for name do`` (no
``in``: they loop over the arguments; ``select`` too), ``shift``, ``getopts``, ``BASH_ARGV``/``BASH_ARGC``,
``/proc/$$/cmdline``; in zsh ``$argv`` and ``$ARGC``.

Not counted, as the shell does not expand them there: comments, escaped characters (``\\$1``), single-
quoted text and ``$'...'`` (``awk '{print $1}'``), the body of a here-document whose delimiter is quoted
(``<<'EOF'``, ``<<"EOF"``, ``<<\\EOF``; an unquoted one expands, and is read, quotes and all), and the
body of a function written ``name() {`` ... ``}`` with the braces alone at the ends of their lines and no
other brace between (its ``$1`` is its own argument; the script's reach it only through a call such as
``main "$@"``, which is counted where it stands). A function of any other form is read as code.
All three are counted after all when the script can run text again as code (``eval``, ``trap``,
``alias``, ``${var@P}``, sourcing its own input): ``trap 'echo $1' EXIT`` reads the script's ``$1``.
Accepted, as rare: arithmetic that evaluates a variable's text (``x='a[$1]'; (( x ))``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_READS = re.compile(
    r"\$(?:[1-9@*#]|\{(?:[0-9@*]|#[@*]?\}|![0-9@*#]))"
    r"|(?<![\w-])(?:shift|getopts)(?![\w-])"
    r"|/proc/\$\$/cmdline"
    r"|(?<![\w-])(?:for|select)[ \t]+[A-Za-z_]\w*[ \t]*(?:;|do(?![\w-])|\n(?![ \t\n]*in(?![\w-]))|\Z)"
)
_READS_FROM_ANYWHERE = re.compile(r"(?<![\w-])BASH_ARG[VC](?![\w-])")  # a function's BASH_ARGV holds the script's too
_READS_IN_ZSH = re.compile(r"\$\{?#?(?:argv|ARGC)(?!\w)")
_ZSH = re.compile(r"#!\s*(?:/usr)?/bin/(?:env\s+)?zsh(?:\s|$)")
_EVALUATES = re.compile(
    r"(?<![\w-])(?:eval|trap|alias)(?![\w-])|@P\}|(?<![\w-])(?:source|\.)[ \t]+(?:/dev/stdin|/dev/fd/|/proc/self/fd/|<\()"
)
_FUNCTION_START = re.compile(r"[ \t]*(?:function[ \t]+[^\s(){}]+(?:[ \t]*\([ \t]*\))?|[A-Za-z_][\w:.-]*[ \t]*\([ \t]*\))[ \t]*\{[ \t]*")
_FUNCTION_END = re.compile(r"[ \t]*\}[ \t]*")
_WORD_START = " \t\n;&|(<>"
_HEREDOC_WORD_END = " \t\n;&|<>()"


def first_argument_read(script: str) -> tuple[int, str] | None:
    """(line number, the line) of the first place the script may read its arguments; None when it never does."""
    lexed = _lex(script)
    evaluates = _EVALUATES.search(_masked(script, lexed.comment)) is not None
    quoted = set() if evaluates else lexed.quoted
    in_function = set() if evaluates else _function_bodies(script, lexed)
    found = [
        match.start()
        for pattern, text in (
            (_READS, _masked(script, lexed.comment | quoted | in_function)),
            (_READS_FROM_ANYWHERE, _masked(script, lexed.comment | quoted)),
            *(((_READS_IN_ZSH, _masked(script, lexed.comment | quoted | in_function)),) if _ZSH.match(script) else ()),
        )
        if (match := pattern.search(text))
    ]
    if not found:
        return None
    number = script.count("\n", 0, min(found)) + 1
    return number, script.splitlines()[number - 1].strip()


@dataclass
class _Lexed:
    comment: set[int] = field(default_factory=set)  # comments and escaped characters: never expanded
    quoted: set[int] = field(default_factory=set)  # single quotes, $'...', quoted here-document bodies
    braces: list[tuple[int, int]] = field(default_factory=list)  # (position, depth) of { and } outside ${...}


@dataclass
class _Frame:
    kind: str  # code (the script, $(...)), dq ("..."), bq (`...`), arith ($((...)), ((...)))
    parens: int = 0  # open parentheses of $( or $(( still to close
    params: int = 0  # open ${
    cases: int = 0  # open case ... esac (their patterns' ")" close nothing)


def _lex(script: str) -> _Lexed:
    lexed = _Lexed()
    stack = [_Frame("code")]
    pending: list[tuple[str, bool, bool]] = []  # here-documents whose bodies start at the next line: (delimiter, quoted, -)
    i, n = 0, len(script)

    def mark(into: set[int], start: int, end: int) -> None:
        into.update(k for k in range(start, min(end, n)) if script[k] != "\n")

    while i < n:
        frame, char = stack[-1], script[i]
        if frame.kind == "dq":
            if char == "\\":
                if script[i + 1 : i + 2] in ("$", "`", '"', "\\"):
                    mark(lexed.comment, i, i + 2)
                i += 2
            elif char == '"':
                stack.pop()
                i += 1
            elif char == "$" or char == "`":
                i = _open(script, i, stack, lexed)
            elif char == "}" and frame.params:
                frame.params -= 1
                i += 1
            else:
                i += 1
            continue
        # code, bq, arith
        if char == "\\":
            mark(lexed.comment, i, i + 2)
            i += 2
        elif char == "`" and frame.kind == "bq":
            stack.pop()
            i += 1
        elif char == "'":
            end = script.find("'", i + 1)
            end = n if end < 0 else end + 1
            mark(lexed.quoted, i, end)
            i = end
        elif char == '"':
            stack.append(_Frame("dq"))
            i += 1
        elif char in "$`":
            i = _open(script, i, stack, lexed)
        elif char == "(":
            if frame.kind == "code" and script.startswith("((", i) and _starts_word(script, i):
                stack.append(_Frame("arith", parens=2))
                i += 2
                continue
            if frame.parens:
                frame.parens += 1
            i += 1
        elif char == ")":
            if frame.parens and not (frame.cases and frame.parens == 1):
                frame.parens -= 1
                if frame.parens == 0:
                    stack.pop()
            i += 1
        elif char == "}" and frame.params:
            frame.params -= 1
            i += 1
        elif char in "{}":
            if frame.kind == "code":
                lexed.braces.append((i, len(stack)))
            i += 1
        elif char == "#" and frame.kind == "code" and (i == 0 or script[i - 1] in _WORD_START):
            end = script.find("\n", i)
            end = n if end < 0 else end
            mark(lexed.comment, i, end)
            i = end
        elif char == "<" and frame.kind == "code" and script.startswith("<<<", i):
            i += 3  # a here-string: a word, lexed as any
        elif char == "<" and frame.kind == "code" and script.startswith("<<", i):
            i = _here_document(script, i + 2, pending)
        elif char == "\n" and frame.kind == "code" and pending:
            i = _here_document_bodies(script, i + 1, pending, lexed)
        elif frame.kind == "code" and char in "ce" and _starts_word(script, i):
            word = re.match(r"(?:case|esac)(?![\w-])", script[i : i + 5])
            if word:
                frame.cases = max(0, frame.cases + (1 if word[0] == "case" else -1))
            i += 1
        else:
            i += 1
    return lexed


def _starts_word(script: str, i: int) -> bool:
    return i == 0 or script[i - 1] in _WORD_START


def _open(script: str, i: int, stack: list[_Frame], lexed: _Lexed) -> int:
    """At a $ or a backquote: what it opens; the position after it."""
    frame = stack[-1]
    if script[i] == "`":
        stack.append(_Frame("bq"))
        return i + 1
    if script.startswith("$((", i):
        stack.append(_Frame("arith", parens=2))
        return i + 3
    if script.startswith("$(", i):
        stack.append(_Frame("code", parens=1))
        return i + 2
    if script.startswith("${", i):
        frame.params += 1
        return i + 2
    if script.startswith("$'", i) and frame.kind != "dq":  # ANSI-C quoting: backslash escapes, no expansion
        k = i + 2
        while k < len(script) and script[k] != "'":
            k += 2 if script[k] == "\\" else 1
        lexed.quoted.update(p for p in range(i, min(k + 1, len(script))) if script[p] != "\n")
        return k + 1
    if script.startswith('$"', i) and frame.kind != "dq":
        stack.append(_Frame("dq"))
        return i + 2
    return i + 1


def _here_document(script: str, i: int, pending: list[tuple[str, bool, bool]]) -> int:
    """After ``<<``: its delimiter word (quoted if any part of it is), queued for the next line."""
    strip_tabs = script.startswith("-", i)
    i += strip_tabs
    while i < len(script) and script[i] in " \t":
        i += 1
    word, quoted = [], False
    while i < len(script) and script[i] not in _HEREDOC_WORD_END:
        if script[i] in "'\"":
            end = script.find(script[i], i + 1)
            end = len(script) if end < 0 else end
            word.append(script[i + 1 : end])
            quoted, i = True, end + 1
        elif script[i] == "\\":
            word.append(script[i + 1 : i + 2])
            quoted, i = True, i + 2
        else:
            word.append(script[i])
            i += 1
    if word:
        pending.append(("".join(word), quoted, strip_tabs))
    return i


def _here_document_bodies(script: str, i: int, pending: list[tuple[str, bool, bool]], lexed: _Lexed) -> int:
    """The bodies of the queued here-documents, from ``i``: a quoted one's text is never expanded; an
    unquoted one's is, but for escaped characters (its quotes are plain characters)."""
    n = len(script)
    for delimiter, quoted, strip_tabs in pending:
        while i < n:
            end = script.find("\n", i)
            end = n if end < 0 else end
            line = script[i:end]
            if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                i = end + 1
                break
            if quoted:
                lexed.quoted.update(k for k in range(i, end))
            else:
                k = i
                while k < end:
                    if script[k] == "\\":
                        lexed.comment.update(range(k, min(k + 2, end)))
                        k += 2
                    else:
                        k += 1
            i = end + 1
    pending.clear()
    return i


def _function_bodies(script: str, lexed: _Lexed) -> set[int]:
    """The positions inside functions written ``name() {`` ... ``}`` (each brace the last, or only, word
    of its line, at the script's own level) with no other brace between: whose end is certain."""
    text = _masked(script, lexed.comment)
    starts = {position: index for index, (position, _) in enumerate(lexed.braces)}
    line_starts = [0, *(m.end() for m in re.finditer("\n", script))]
    inside: set[int] = set()
    for number, start in enumerate(line_starts):
        end = line_starts[number + 1] - 1 if number + 1 < len(line_starts) else len(script)
        opening = _FUNCTION_START.fullmatch(text, start, end)
        if not opening:
            continue
        brace = text.rindex("{", start, end)
        index = starts.get(brace)
        if index is None or lexed.braces[index][1] != 1 or index + 1 >= len(lexed.braces):
            continue
        closing, depth = lexed.braces[index + 1]
        line_start = script.rfind("\n", 0, closing) + 1
        line_end = script.find("\n", closing)
        line_end = len(script) if line_end < 0 else line_end
        if depth == 1 and script[closing] == "}" and _FUNCTION_END.fullmatch(text, line_start, line_end):
            inside.update(range(end + 1, line_start))
    return inside


def _masked(script: str, positions: set[int]) -> str:
    """The script with the characters at ``positions`` blanked (lines and offsets kept)."""
    if not positions:
        return script
    return "".join(" " if k in positions else char for k, char in enumerate(script))
