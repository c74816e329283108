"""The reST of the experiments' descriptions (their module docstrings) as HTML.

A small subset, the one the descriptions use — not a reST parser:

* paragraphs (separated by blank lines; lines of a paragraph are joined);
* bullet lists (``*`` or ``-`` then a space; a deeper-indented line continues the item);
* a line underlined with ``-``, ``=`` or ``~`` is a heading (``<h3>``); a numpydoc ``Examples``
  section ends the description (doctests are not prose);
* inline: ````literal```` and ```default role``` → ``<code>``; ``:role:`target``` →
  ``<code>target</code>`` (``~a.b.c`` shows ``c``; ``text <target>`` shows ``text``);
  ``**strong**`` and ``*emphasis*``.

Everything else is text: it is escaped first, so no markup of the input reaches the page.

Examples
--------
>>> str(rest_to_html("Run ``topdown`` (see :func:`~postproc.methods.topdown.topdown`).\\n\\n"
...                  "* one\\n  item\\n* *two*"))
'<p>Run <code>topdown</code> (see <code>topdown</code>).</p>\\n<ul><li>one
item</li><li><em>two</em></li></ul>'
"""

from __future__ import annotations

import html
import re

from markupsafe import Markup

__all__ = ["rest_to_html"]

_BULLET = re.compile(r"^(\s*)[*-] +(.*)$")
_UNDERLINE = re.compile(r"^\s*([-=~^])\1{2,}\s*$")
# inline markup, in the order it is replaced (literals first: nothing inside them is markup)
_LITERAL = re.compile(r"``(.+?)``", re.S)
_ROLE = re.compile(r":[a-z]+(?::[a-z]+)?:`(.+?)`", re.S)
_DEFAULT_ROLE = re.compile(r"(?<![\w`])`([^`]+?)`(?![\w`])", re.S)
_STRONG = re.compile(r"\*\*(\S(?:.*?\S)?)\*\*", re.S)
_EMPHASIS = re.compile(r"(?<![\w*])\*(\S(?:[^*]*?\S)?)\*(?![\w*])", re.S)
_PLACEHOLDER = "\x00{}\x00"


def _role_text(target: str) -> str:
    target = re.sub(r"\s+", "", target) if "<" not in target else target
    shown = re.match(r"(.*?)\s*<.*>$", target, re.S)
    if shown and shown.group(1):
        return " ".join(shown.group(1).split())
    return target.rsplit(".", 1)[-1] if target.startswith("~") else target.lstrip("!")


def _inline(text: str) -> str:
    """One paragraph's text (already joined) as HTML."""
    codes: list[str] = []

    def keep(content: str) -> str:
        codes.append(f"<code>{html.escape(content, quote=False)}</code>")
        return _PLACEHOLDER.format(len(codes) - 1)

    text = _LITERAL.sub(lambda m: keep(" ".join(m.group(1).split())), text)
    text = _ROLE.sub(lambda m: keep(_role_text(m.group(1))), text)
    text = _DEFAULT_ROLE.sub(lambda m: keep(m.group(1)), text)
    text = html.escape(text, quote=False)
    text = _STRONG.sub(r"<strong>\1</strong>", text)
    text = _EMPHASIS.sub(r"<em>\1</em>", text)
    return re.sub("\x00(\\d+)\x00", lambda m: codes[int(m.group(1))], text)


def _blocks(lines: list[str]):
    """``("p", text)``, ``("ul", [item, …])`` and ``("h", text)`` blocks of the lines."""
    paragraph: list[str] = []
    items: list[list[str]] = []
    item_indent = 0

    def flush():
        out = []
        if paragraph:
            out.append(("p", " ".join(s.strip() for s in paragraph)))
            paragraph.clear()
        if items:
            out.append(("ul", [" ".join(s.strip() for s in item) for item in items]))
            items.clear()
        return out

    for i, line in enumerate(lines):
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if not line.strip():
            if not items:
                yield from flush()
            continue
        if _UNDERLINE.match(line) and i > 0 and lines[i - 1].strip():
            continue                                   # the heading's underline, handled above
        if _UNDERLINE.match(following) and not _BULLET.match(line):
            yield from flush()
            yield ("h", line.strip())
            continue
        bullet = _BULLET.match(line)
        if bullet:
            if paragraph:
                yield from flush()
            items.append([bullet.group(2)])
            item_indent = len(bullet.group(1))
            continue
        indent = len(line) - len(line.lstrip())
        if items and indent > item_indent:
            items[-1].append(line)                     # the item continues
            continue
        if items:
            yield from flush()
        paragraph.append(line)
    yield from flush()


def rest_to_html(text: str) -> Markup:
    """The description ``text`` (reST subset of the module docstring) as safe HTML.

    Parameters
    ----------
    text : str

    Returns
    -------
    markupsafe.Markup
        Block elements (``<p>``, ``<ul>``, ``<h3>``) joined by newlines; safe to put in a
        template as it is (every piece of the input was escaped).

    Examples
    --------
    >>> str(rest_to_html("a <b> & **c** by :mod:`x.y\\n   .z`\\n\\nExamples\\n--------\\n>>> 1"))
    '<p>a &lt;b&gt; &amp; <strong>c</strong> by <code>x.y.z</code></p>'
    >>> str(rest_to_html("Title\\n=====\\n\\ntext with `default` role"))
    '<h3>Title</h3>\\n<p>text with <code>default</code> role</p>'
    """
    lines = text.expandtabs().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == "Examples" and i + 1 < len(lines) and _UNDERLINE.match(lines[i + 1]):
            lines = lines[:i]
            break
    out = []
    for kind, content in _blocks(lines):
        if kind == "p":
            out.append(f"<p>{_inline(content)}</p>")
        elif kind == "h":
            out.append(f"<h3>{_inline(content)}</h3>")
        else:
            out.append("<ul>" + "".join(f"<li>{_inline(item)}</li>" for item in content)
                       + "</ul>")
    return Markup("\n".join(out))
