"""probing.tokenize: the one simple rule for sentences given as strings (issue #15)."""

from __future__ import annotations

import pytest

from probing.tokenize import as_words, tokenize


@pytest.mark.parametrize(
    "text, tokens",
    [
        # clitics split off as in UD EWT, PTB and SemCor ("Alusik 's", "do n't", "ca n't")
        ("Chico Ruiz made a spectacular play on Alusik's grounder.",
         ["Chico", "Ruiz", "made", "a", "spectacular", "play", "on", "Alusik", "'s", "grounder", "."]),
        ("I don't know, we can't.", ["I", "do", "n't", "know", ",", "we", "ca", "n't", "."]),
        ("They're here\u2019s", ["They", "'re", "here", "\u2019s"]),
        # already tokenized text is unchanged
        ("Alusik 's grounder .", ["Alusik", "'s", "grounder", "."]),
        ("`` Hello '' , she said", ["``", "Hello", "''", ",", "she", "said"]),
        # edge punctuation: one token per character, a run of one character kept; inner punctuation kept
        ('"Hello," she said (quietly)...', ['"', "Hello", ",", '"', "she", "said", "(", "quietly", ")", "..."]),
        ("U.S. e-mail 3.5", ["U.S", ".", "e-mail", "3.5"]),
        ("  ", []),
    ],
)  # fmt: skip
def test_tokenize(text, tokens):
    assert tokenize(text) == tokens


def test_as_words_checks_lists_and_empty_input():
    assert as_words("a b.") == ["a", "b", "."] and as_words(["Chico_Ruiz", "'s"]) == ["Chico_Ruiz", "'s"]
    with pytest.raises(ValueError, match="sentence is empty"):
        as_words("   ")
    with pytest.raises(ValueError, match="token 1 is ''"):
        as_words(["a", ""])
