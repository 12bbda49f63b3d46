"""Message text as safe, readable HTML: Markdown, highlighted code, harness wrappers.

Everything a row shows comes from agents and the people they talk to, so the one
rule here is that no byte of it ever becomes markup of its own:

- Markdown is parsed by markdown-it-py with raw HTML off: `<script>`, `<img onerror>`
  and every other tag are text. Links keep only http(s), mailto and in-page targets;
  any other scheme (`javascript:`, `data:`, `vbscript:` …) is refused and the link
  shows as plain text. Links carry `rel="nofollow noopener noreferrer"`.
- Images are never loaded (a tracking pixel would tell a third party who read the row):
  an image becomes a link to it, labelled with its alt text.
- Code is highlighted by Pygments into `<span class="…">` (classes, no inline style, so
  the Content-Security-Policy's `style-src 'self'` holds; the colours are in app.css).
- Claude Code's wrappers (`<local-command-caveat>`, `<command-name>`, `<system-reminder>`
  …) are the harness talking, not the person: they are cut out as muted meta parts.

Rendering is bounded: text past RENDER_LIMIT characters is shown escaped, unparsed.
"""

import html
import json
import re
from functools import lru_cache

from django.utils.safestring import SafeString, mark_safe
from markdown_it import MarkdownIt
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import JsonLexer, get_lexer_by_name, get_lexer_for_filename
from pygments.util import ClassNotFound

# Markdown and highlighting cost time linear in the text; past this much a row is shown
# escaped as it is (it is also collapsed behind "Show all", so rarely opened).
RENDER_LIMIT = 60_000
HIGHLIGHT_LIMIT = 30_000

ALLOWED_SCHEMES = ("http:", "https:", "mailto:")
LINK_REL = "nofollow noopener noreferrer"

# The tags Claude Code wraps around what the harness, not the person, put in a user turn.
HARNESS_TAGS = (
    "local-command-caveat", "local-command-stdout", "local-command-stderr", "command-name",
    "command-message", "command-args", "system-reminder", "user-prompt-submit-hook",
    "bash-input", "bash-stdout", "bash-stderr",
)
_WRAPPER = re.compile(r"<(" + "|".join(HARNESS_TAGS) + r")>(.*?)</\1>", re.S)

_FORMATTER = HtmlFormatter(nowrap=True)


def _valid_link(url: str) -> bool:
    """Only web, mail and same-page links; a scheme hidden by case, spaces or control
    characters is still a scheme (markdown-it has already percent-encoded the URL)."""
    probe = re.sub(r"[\x00-\x20]", "", html.unescape(url)).lower()
    if probe.startswith(("#", "/", "./", "../", "?")) and not probe.startswith("//"):
        return True
    if re.match(r"^[a-z][a-z0-9+.\-]*:", probe):
        return probe.startswith(ALLOWED_SCHEMES)
    # No scheme at all ("example.com/x"): a relative link, harmless.
    return not probe.startswith("//")


def _highlight(code: str, lang: str) -> str:
    if len(code) > HIGHLIGHT_LIMIT:
        return html.escape(code)
    try:
        lexer = get_lexer_by_name(lang, stripnl=False) if lang else None
    except ClassNotFound:
        lexer = None
    if lexer is None:
        return html.escape(code)
    return _unwrap(highlight(code, lexer, _FORMATTER))


# Whitespace and punctuation have no colour of their own: a span each would only make
# the page larger (a JSON argument is half punctuation and indentation).
_PLAIN_SPAN = re.compile(r'<span class="(?:w|p)">([^<]*)</span>')


def _unwrap(highlighted: str) -> str:
    return _PLAIN_SPAN.sub(r"\1", highlighted)


def _fence(self, tokens, idx, options, env):
    token = tokens[idx]
    lang = re.sub(r"[^A-Za-z0-9_+.#-]", "", (token.info or "").split(" ")[0])[:40]
    label = f'<span class="code-lang">{html.escape(lang)}</span>' if lang else ""
    body = _highlight(token.content, lang.lower())
    return f'<div class="code">{label}<pre class="highlight"><code>{body}</code></pre></div>\n'


def _link_open(self, tokens, idx, options, env):
    tokens[idx].attrSet("rel", LINK_REL)
    return self.renderToken(tokens, idx, options, env)


def _image(self, tokens, idx, options, env):
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env) or "image"
    src = html.escape(token.attrGet("src") or "", quote=True)
    return f'<a class="md-image" href="{src}" rel="{LINK_REL}">image: {html.escape(alt)}</a>'


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.enable(["table", "strikethrough"])
    md.validateLink = _valid_link
    md.add_render_rule("fence", _fence)
    md.add_render_rule("code_block", _fence)
    md.add_render_rule("link_open", _link_open)
    md.add_render_rule("image", _image)
    return md


def markdown(text: str) -> SafeString:
    """Untrusted Markdown as safe HTML (see the module docstring)."""
    if len(text) > RENDER_LIMIT:
        return mark_safe(f'<div class="plain">{html.escape(text)}</div>')
    return mark_safe(_parser().render(text))


def code(text: str, lang: str = "") -> SafeString:
    """A block of code or data, highlighted when its language is known."""
    return mark_safe(_highlight(text, lang))


def code_for_path(text: str, path: str) -> SafeString | None:
    """A file's text highlighted by its name's language (a tool that read `path`), or None."""
    if not path or len(text) > HIGHLIGHT_LIMIT:
        return None
    try:
        lexer = get_lexer_for_filename(path.rsplit("/", 1)[-1][:200], stripnl=False)
    except ClassNotFound:
        return None
    return mark_safe(_unwrap(highlight(text, lexer, _FORMATTER)))


def json_or_text(text: str) -> tuple[SafeString, bool]:
    """Tool output: JSON pretty-printed and highlighted, anything else escaped as it is."""
    stripped = text.strip()
    if stripped[:1] in ("{", "[") and len(text) <= HIGHLIGHT_LIMIT:
        try:
            pretty = json.dumps(json.loads(stripped), indent=2, ensure_ascii=False)
        except ValueError:
            pass
        else:
            return mark_safe(_unwrap(highlight(pretty, JsonLexer(), _FORMATTER))), True
    return mark_safe(html.escape(text)), False


def split_wrappers(text: str) -> list[tuple[str, str]]:
    """Text cut into ("text", …) and (tag, inner text) parts at the harness's wrappers.
    Text between wrappers that is only whitespace is dropped."""
    parts, at = [], 0
    for match in _WRAPPER.finditer(text):
        before = text[at:match.start()]
        if before.strip():
            parts.append(("text", before.strip("\n")))
        parts.append((match.group(1), match.group(2).strip()))
        at = match.end()
    rest = text[at:]
    if rest.strip() or not parts:
        parts.append(("text", rest.strip("\n") if parts else rest))
    return parts
