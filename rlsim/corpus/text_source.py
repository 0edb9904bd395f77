"""Real English text without a download: docstrings of the Python standard library.

``stdlib_paragraphs()`` walks a fixed list of modules (sorted member names, ``inspect.getdoc``),
keeps prose-like paragraphs and drops duplicates (inherited docstrings repeat), so the same
Python gives the same list in the same order. ``corrupt`` makes a less fluent copy of a paragraph
(words shuffled, a sentence repeated, the text cut), the "worse sample" of a preference pair.
"""

from __future__ import annotations

import hashlib
import importlib
import inspect
import random
import re
import warnings
from dataclasses import dataclass
from functools import lru_cache

# Pure-Python modules with plenty of prose docstrings and no import side effects.
MODULES = (
    "argparse",
    "ast",
    "asyncio",
    "base64",
    "bisect",
    "calendar",
    "cmd",
    "codecs",
    "collections",
    "configparser",
    "contextlib",
    "copy",
    "csv",
    "dataclasses",
    "datetime",
    "decimal",
    "difflib",
    "email",
    "email.message",
    "email.utils",
    "enum",
    "fileinput",
    "fnmatch",
    "fractions",
    "ftplib",
    "functools",
    "getopt",
    "gettext",
    "glob",
    "gzip",
    "heapq",
    "hmac",
    "html",
    "html.parser",
    "http.client",
    "http.cookiejar",
    "http.server",
    "imaplib",
    "inspect",
    "io",
    "ipaddress",
    "json",
    "locale",
    "logging",
    "logging.handlers",
    "lzma",
    "mailbox",
    "mimetypes",
    "multiprocessing",
    "netrc",
    "numbers",
    "operator",
    "optparse",
    "os",
    "pathlib",
    "pickle",
    "pickletools",
    "pkgutil",
    "platform",
    "plistlib",
    "poplib",
    "pprint",
    "profile",
    "pstats",
    "queue",
    "quopri",
    "random",
    "re",
    "reprlib",
    "sched",
    "secrets",
    "selectors",
    "shelve",
    "shlex",
    "shutil",
    "smtplib",
    "socket",
    "socketserver",
    "sqlite3",
    "statistics",
    "string",
    "subprocess",
    "tarfile",
    "tempfile",
    "textwrap",
    "threading",
    "timeit",
    "tokenize",
    "trace",
    "traceback",
    "types",
    "typing",
    "unittest",
    "urllib.parse",
    "urllib.request",
    "uuid",
    "warnings",
    "wave",
    "weakref",
    "xml.dom.minidom",
    "xml.etree.ElementTree",
    "zipfile",
    "zipimport",
)
MIN_WORDS = 12
MAX_WORDS = 280  # ~1.3 WordPiece tokens a word: stays under 512 tokens with special tokens


@dataclass(frozen=True)
class Paragraph:
    module: str
    text: str


@lru_cache(maxsize=1)
def stdlib_paragraphs() -> tuple[Paragraph, ...]:
    """Every prose paragraph of ``MIN_WORDS..MAX_WORDS`` words from ``MODULES``, deduplicated, in a fixed order."""
    seen: set[str] = set()
    out: list[Paragraph] = []
    for name in MODULES:
        # Reading every member touches deprecated ones (typing.io, ...): their warnings are not ours to fix.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                module = importlib.import_module(name)
            except ImportError:  # a Python built without e.g. sqlite3: fewer texts, same order otherwise
                continue
            docs = _docstrings(module)
        for doc in docs:
            for para in doc.split("\n\n"):
                text = " ".join(para.split())
                if _is_prose(text) and text not in seen:
                    seen.add(text)
                    out.append(Paragraph(name, text))
    return tuple(out)


def _docstrings(module) -> list[str]:
    docs = [inspect.getdoc(module) or ""]
    for _, member in sorted(vars(module).items()):
        if getattr(member, "__module__", None) != module.__name__:
            continue  # re-exports would repeat another module's text
        if inspect.isclass(member) or inspect.isfunction(member):
            docs.append(inspect.getdoc(member) or "")
            if inspect.isclass(member):
                docs += [inspect.getdoc(m) or "" for _, m in sorted(vars(member).items()) if inspect.isfunction(m)]
    return docs


def _is_prose(text: str) -> bool:
    words = text.split()
    if not MIN_WORDS <= len(words) <= MAX_WORDS or ">>>" in text:
        return False
    letters = sum(c.isalpha() for c in text)
    return letters / len(text) > 0.7 and text[0].isupper()  # mostly words, starts like a sentence


def stable_hash(text: str) -> int:
    """A hash that does not change between processes (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big")


def split_of(paragraph: Paragraph, buckets: int) -> int:
    """Which of ``buckets`` disjoint splits a paragraph's module belongs to (whole modules, so no topic leaks)."""
    return stable_hash(paragraph.module) % buckets


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def corrupt(text: str, rng: random.Random, strength: float = 1.0) -> str:
    """A clearly less fluent copy of ``text``: one of shuffle words, repeat a sentence, cut sentences short.

    Chosen by ``rng``; ``strength`` in (0, 1] scales the damage (fraction of words shuffled, how
    often the sentence repeats, how much is cut). These are the "worse samples" of preference pairs.
    """
    words = text.split()
    kind = rng.choice(("shuffle", "repeat", "cut"))
    if kind == "repeat":
        sentences = _SENTENCE.split(text)
        i = rng.randrange(len(sentences))
        times = 1 + round(2 * strength)
        return " ".join(sentences[: i + 1] + [sentences[i]] * times + sentences[i + 1 :])
    if kind == "cut":
        # Every sentence loses its end: fragments that stop mid-thought, like a garbled answer.
        sentences = _SENTENCE.split(text)
        if len(sentences) == 1:
            keep = max(3, round(len(words) * (1 - 0.6 * strength)))
            return " ".join(words[: min(keep, len(words) - 1)]).rstrip(".!?:;,")
        cut = [s.split()[: max(2, round(len(s.split()) * (1 - 0.6 * strength)))] for s in sentences]
        return " ".join(" ".join(c).rstrip(".!?:;,") + "." for c in cut)
    n = max(2, round(len(words) * strength))
    start = rng.randrange(0, len(words) - n + 1)
    chunk = words[start : start + n]
    rng.shuffle(chunk)
    return " ".join(words[:start] + chunk + words[start + n :])
