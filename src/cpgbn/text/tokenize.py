"""Word tokenizer for raw and pre-tokenized English text.

The CPGBN paper feeds its model word sequences produced by Johnson & Zhang's (2015)
preprocessing: lower-cased text with words, punctuation and emoticons as separate tokens.
Their scripts are not part of this library, so this module re-states the rules, keeping the
property that matters for the datasets here: MR, SUBJ and TREC were released already
tokenized and lower-cased, and for them the tokenizer must (almost always) return the plain
whitespace split, while raw IMDB reviews get split into comparable tokens.

Rules, applied in this order:

1. The text is lower-cased (``str.lower``) and HTML line breaks (``<br />``, ``<br/>``,
   ``<br>``, in any case and with any spacing) become spaces.
2. Whitespace (anything ``str.isspace`` accepts) separates tokens and is never part of one.
3. Emoticons are single tokens and are matched before anything else, so ``:-)`` is not
   split into three punctuation tokens.  An emoticon that ends in a letter or digit
   (``:d``, ``:p``, ``<3``) only counts when no letter or digit follows, so ``re:plan``
   and ``<30`` are not emoticons.
4. A word is a run of letters and digits (any script) that may contain single ``'``,
   ``-``, ``.``, ``/`` or ``&`` *between* two letters or digits: ``e-mail``,
   ``answers.com``, ``21st``, ``don't``, ``co-writer/director``, ``j.r.r``, ``at&t``.
   A trailing apostrophe or period is therefore never part of a word (``dogs'`` gives
   ``dogs`` and ``'``; ``end.`` gives ``end`` and ``.``).
5. A contraction split off by an earlier tokenizer is one word: ``'s``, ``'t``, ``'re``,
   ``'ve``, ``'ll``, ``'d``, ``'m``, ``'em`` (when no letter or digit follows), and
   ``n't`` (already a word by rule 4).  Other leading apostrophes are opening quotes and
   stay separate (``'hello'`` gives ``'``, ``hello``, ``'``).
6. Every other non-space character is its own token, except that a run of the same
   character is one token: ``...``, ``!!!`` and ``--`` are single tokens, while ``?!`` is
   two.

Nothing is dropped apart from whitespace and HTML line breaks, so joining the tokens gives
back the lower-cased text without its whitespace.  The work is one compiled regular
expression (plus a substitution when the text contains ``<br``).
"""
from __future__ import annotations

import re

__all__ = ["EMOTICONS", "tokenize"]

#: Emoticons kept as single tokens (already lower-case: the text is lower-cased first).
EMOTICONS: tuple[str, ...] = (
    ":-)", ":)", ":-(", ":(", ";-)", ";)", ":-d", ":d", ":-p", ":p", ";-p", ";p", ";-d",
    ";d", "=)", "=(", ":/", ":-/", ":\\", ":-\\", ":'(", ":')", ":'-(", ":-|", ":|",
    ":-o", ":o", ":-*", ":*", ":]", ":[", ":-]", ":-[", ":-s", ":-x", ">:(", ">:-(",
    "<3", "</3", "^_^", "-_-", "o_o",
)

_ALNUM = r"[^\W_]"  # a letter or digit in any script (\w without the underscore)
_CONTRACTIONS = ("s", "t", "re", "ve", "ll", "d", "m", "em")


def _emoticon_pattern() -> str:
    # Longest first, so ":-)" wins over ":-" and "</3" over "<3"; an emoticon ending in a
    # letter or digit must not run into one ("re:plan", "<30").
    alternatives = []
    for emoticon in sorted(set(EMOTICONS), key=len, reverse=True):
        escaped = re.escape(emoticon)
        if emoticon[-1].isalnum():
            escaped += rf"(?!{_ALNUM})"
        elif emoticon[-1] in "/\\":
            escaped += r"(?![/\\])"  # "http://" holds no emoticon
        alternatives.append(escaped)
    return "|".join(alternatives)


def _token_pattern() -> str:
    emoticon = _emoticon_pattern()
    contraction = r"'(?:" + "|".join(_CONTRACTIONS) + rf")(?!{_ALNUM})"
    word = rf"{_ALNUM}+(?:['\-./&]{_ALNUM}+)*"
    other = r"(\S)\2*"  # group 2: one non-space character, repeated
    return rf"({emoticon}|{contraction}|{word}|{other})"


_TOKEN_RE = re.compile(_token_pattern())
_BREAK_RE = re.compile(r"<\s*br\s*/?\s*>")


def tokenize(text: str) -> list[str]:
    """Split ``text`` into lower-case tokens (see the module docstring for the rules).

    >>> tokenize("I loved it :-) ... don't miss the co-writer/director's cut!!")
    ['i', 'loved', 'it', ':-)', '...', "don't", 'miss', 'the', "co-writer/director's", 'cut', '!!']
    """
    if not isinstance(text, str):
        raise TypeError(f"tokenize expects a str, got {type(text).__name__}")
    lowered = text.lower()
    if "<" in lowered and "br" in lowered:
        lowered = _BREAK_RE.sub(" ", lowered)
    return [match[0] for match in _TOKEN_RE.findall(lowered)]
