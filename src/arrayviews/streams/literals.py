"""String literals of Spark SQL conditions kept verbatim through sqlglot.

sqlglot reads string literals by its own rules, which are not Spark's (``'a''b'`` is one literal
``a'b`` to Spark but two concatenated ones to sqlglot's Spark dialect; ``"x""y"`` likewise), and
writes back the value it decoded. So before a condition is handed to sqlglot, every string literal
(a run of adjacent ones, which Spark concatenates, counts as one) is replaced by a plain literal of
the same length (``'xxx'``, so every offset of the text stays where it was), and after parsing
each such literal becomes a node that prints the original text unchanged: Spark then reads it
exactly as the user wrote it.
"""

from __future__ import annotations

from sqlglot import exp

from arrayviews.model.text_lines import LINE_BREAK

_NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class LiteralError(ValueError):
    """A string literal could not be located (``offset`` into the text)."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def _string_end(text: str, start: int, raw: bool) -> int:
    """The offset just after the string literal whose opening quote is at ``start`` (Spark's
    lexer: a backslash escapes the next character and a doubled quote is a quote, except in raw
    strings, which end at the next quote)."""
    quote = text[start]
    k = start + 1
    while k < len(text):
        char = text[k]
        if raw:
            if char == quote:
                return k + 1
            k += 1
        elif char == "\\":
            k += 2
        elif char == quote:
            if k + 1 < len(text) and text[k + 1] == quote:
                k += 2
            else:
                return k + 1
        else:
            k += 1
    raise LiteralError("unterminated string literal", start)


def _literal_at(text: str, k: int) -> tuple[int, int] | None:
    """``(start, end)`` of the string literal (with its ``r`` prefix, if raw) beginning at ``k``."""
    char = text[k]
    before = text[k - 1] if k else ""
    if char in "'\"":
        return k, _string_end(text, k, raw=False)
    if char in "rR" and before not in _NAME_CHARS and k + 1 < len(text) and text[k + 1] in "'\"":
        return k, _string_end(text, k + 1, raw=True)
    return None


def string_literals(text: str) -> list[tuple[int, int]]:
    """The ``(start, end)`` spans of the string literals of ``text`` as Spark's lexer reads it, each
    run of literals separated only by white space taken as one span. Quoted names, comments and hex
    literals (``X'0A'``) are skipped over."""
    spans: list[tuple[int, int]] = []
    k = 0
    while k < len(text):
        char = text[k]
        if char == "`":  # a quoted name; `` inside it is a backquote
            end = text.find("`", k + 1)
            while end != -1 and text.startswith("``", end):
                end = text.find("`", end + 2)
            k = len(text) if end == -1 else end + 1
            continue
        if text.startswith("--", k):  # Spark's lexer ends it at \r or \n
            found = LINE_BREAK.search(text, k)
            k = len(text) if found is None else found.end()
            continue
        if text.startswith("/*", k):
            end = text.find("*/", k + 2)
            k = len(text) if end == -1 else end + 2
            continue
        if char in "xX" and (k == 0 or text[k - 1] not in _NAME_CHARS) and text[k + 1 : k + 2] == "'":
            k = _string_end(text, k + 1, raw=True)  # a hex literal: sqlglot reads it as Spark does
            continue
        found = _literal_at(text, k)
        if found is None:
            k += 1
            continue
        start, end = found
        while True:  # adjacent literals are one value to Spark: keep them together
            following = end
            while following < len(text) and text[following] in " \t\r\n":
                following += 1
            more = _literal_at(text, following) if following < len(text) else None
            if more is None:
                break
            end = more[1]
        spans.append((start, end))
        k = end
    return spans


def protect(text: str) -> tuple[str, dict[int, str]]:
    """``text`` with each string literal span replaced by ``'x...x'`` of the same length (line breaks
    kept, so lines and columns stay too), and the original text of each span by its offset."""
    originals: dict[int, str] = {}
    pieces: list[str] = []
    position = 0
    for start, end in string_literals(text):
        original = text[start:end]
        originals[start] = original
        inner = "".join(c if c in "\r\n" else "x" for c in original[1:-1])
        pieces += [text[position:start], "'", inner, "'"]
        position = end
    pieces.append(text[position:])
    return "".join(pieces), originals


def restore(tree: exp.Expression, originals: dict[int, str]) -> exp.Expression:
    """``tree`` (parsed from the protected text) with every placeholder literal printing its
    original text verbatim (a literal node that sqlglot writes out as it is)."""
    used: set[int] = set()

    def verbatim(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, exp.Literal) and node.is_string):
            return node
        start = (node._meta or {}).get("start")
        if start not in originals:
            raise LiteralError("string literal not read as Spark reads it", start or 0)
        used.add(start)
        kept = exp.Literal(this=originals[start], is_string=False)
        kept._meta = node._meta  # its position, for error messages
        return kept

    restored = tree.transform(verbatim, copy=False)
    _restore_field_names(restored, originals, used)
    unused = sorted(set(originals) - used)
    if unused:
        raise LiteralError("string literal not read as Spark reads it", unused[0])
    return restored


def _restore_field_names(tree: exp.Expression, originals: dict[int, str], used: set[int]) -> None:
    """Put back the field names of ``named_struct('name', value, ...)``, which sqlglot reads as
    names (``STRUCT(value AS name)``) that keep no position: the placeholders left unused, in the
    order of the text, are those names in the order of the tree. A name written other than as one
    plain quoted text (escapes, doubled quotes, adjacent literals) stays refused."""
    keys = [
        node.this
        for node in tree.find_all(exp.PropertyEQ, bfs=False)  # depth first: the order of the text
        if isinstance(node.parent, exp.Struct)
        and isinstance(node.this, exp.Identifier)
        and not node.this.quoted
    ]
    unused = sorted(set(originals) - used)
    if not keys or len(keys) != len(unused):
        return
    for key, start in zip(keys, unused, strict=True):
        original = originals[start]
        name = original[1:-1]
        plain = original[0] == "'" and "\\" not in name and "'" not in name and "\n" not in name
        if not plain or key.name != "x" * len(name):
            return
    for key, start in zip(keys, unused, strict=True):
        key.set("this", originals[start][1:-1])
        key.set("quoted", True)
        used.add(start)


__all__ = ["LiteralError", "protect", "restore", "string_literals"]
