"""The ``agreement-patching`` task kind end to end through ``probing run`` and ``probing report`` on a small
generated treebank with the bundled model, and its pairs (aligned by role) against direct calls of patch."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from probing import cli
from probing.analysis.patching import Site, agreement_pairs, patch, read_patch_pairs, role_positions
from probing.corpora.conllu import read_conllu
from probing.errors import InputError
from probing.results import read_results

NOUNS = [("key", "keys"), ("dog", "dogs"), ("book", "books"), ("car", "cars")]
ATTRACTORS = [("cabinet", "cabinets"), ("table", "tables")]
SITES = {f"{d}-{k}" for d in ("forward", "backward") for k in range(3)}


def treebank(path: Path) -> Path:
    """``The N [very old] near the A is/are red .``: subject number x attractor number x length (the optional
    ``very old`` makes pairs of different lengths, which the roles align)."""
    lines = []
    for k, ((ns, np_), (as_, ap), plural, attract_plural, long) in enumerate(
        itertools.product(NOUNS, ATTRACTORS, (False, True), (False, True), (False, True))
    ):
        noun, attractor = (np_ if plural else ns), (ap if attract_plural else as_)
        num, anum = ("Plur" if plural else "Sing"), ("Plur" if attract_plural else "Sing")
        verb, xpos = ("are", "VBP") if plural else ("is", "VBZ")
        extra = [("very", "ADV", "RB", "_", 4, "advmod"), ("old", "ADJ", "JJ", "_", 2, "amod")] if long else []
        o = len(extra)
        words = [
            ("The", "DET", "DT", "_", 2, "det"),
            (noun, "NOUN", "NNS" if plural else "NN", f"Number={num}", 7 + o, "nsubj"),
            *extra,
            ("near", "ADP", "IN", "_", 5 + o, "case"),
            ("the", "DET", "DT", "_", 5 + o, "det"),
            (attractor, "NOUN", "NNS" if attract_plural else "NN", f"Number={anum}", 2, "nmod"),
            (verb, "AUX", xpos, f"Number={num}|Tense=Pres", 7 + o, "cop"),
            ("red", "ADJ", "JJ", "_", 0, "root"),
            (".", "PUNCT", ".", "_", 7 + o, "punct"),
        ]
        lines.append(f"# sent_id = s{k}")
        lemma = {"are": "be", "is": "be"}
        for i, (w, upos, xp, feats, head, rel) in enumerate(words, start=1):
            lines.append(f"{i}\t{w}\t{lemma.get(w, w.lower())}\t{upos}\t{xp}\t{feats}\t{head}\t{rel}\t_\t_")
        lines.append("")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_pairs_are_aligned_by_role(tmp_path):
    """Every base is paired with a sentence whose subject has the other number; roles map across lengths."""
    pairs = agreement_pairs(read_conllu(treebank(tmp_path / "t.conllu")))
    assert len(pairs) == 64
    for r in pairs.itertuples():
        assert r.base[r.subject] in {n for pair in NOUNS for n in pair}
        assert r.source[r.source_subject] in {n for pair in NOUNS for n in pair}
        assert {r.base[r.position], r.source[r.source_position]} == {"is", "are"}
        assert r.candidates == (r.base[r.position], r.source[r.source_position])
    rows, base, source = role_positions(pairs, "attractor")
    sub = pairs.iloc[rows]
    assert all(b[i] in {a for pair in ATTRACTORS for a in pair} for b, i in zip(sub.base, base))
    assert all(s[i] in {a for pair in ATTRACTORS for a in pair} for s, i in zip(sub.source, source))
    assert (pairs.base.str.len() != pairs.source.str.len()).any()  # some pairs differ in length


def test_task_kind_through_probing_run_and_report(tmp_path):
    bank = treebank(tmp_path / "t.conllu")
    toml = tmp_path / "patch.toml"
    toml.write_text(
        f'[experiment]\nname = "patch"\nbootstrap = 200\ncache_dir = "{tmp_path / "cache"}"\n\n'
        '[[encoders]]\nname = "lm"\nkind = "elmo"\nmodel = "default"\n\n'
        f'[[tasks]]\nname = "where"\nkind = "agreement-patching"\ndata = "conllu:{bank}"\nmax_pairs = 40\n'
    )
    out = tmp_path / "out"
    assert cli.main(["run", str(toml), "--out", str(out), "--quiet"]) == 0
    rows = read_results(out)
    value = rows.set_index(["split", "layer", "metric"]).value
    assert set(rows.split) == {"subject", "attractor", "before-verb"}
    assert {*SITES, "forward-all", "backward-all"} <= set(rows.layer)
    pairs = agreement_pairs(read_conllu(bank)).head(40)
    # sanity row 1 from direct calls: every forward layer at the word before the verb gives the source's own
    # preference, so the interchange accuracy is the share of sources the model gets right
    rows_idx, b, s = role_positions(pairs, "before-verb")
    direct = patch(
        "default",
        list(pairs.base),
        list(pairs.source),
        [Site(layer, "forward", tuple(b)) for layer in range(3)],
        candidates=list(pairs.candidates),
        position=pairs.position.tolist(),
        source_position=pairs.source_position.tolist(),
        align=[{int(x): int(y)} for x, y in zip(b, s)],
    )
    assert value[("before-verb", "forward-all", "interchange-accuracy")] == pytest.approx(
        float((direct.logprob_diff_source < 0).mean())
    )
    # sanity row 3: backward sites before the verb cannot move the backward LM's decision at the verb
    for split in ("subject", "attractor", "before-verb"):
        for layer in ("backward-0", "backward-1", "backward-2", "backward-all"):
            assert value[(split, layer, "interchange-accuracy")] == value[(split, layer, "unpatched-follows-source")]
    # sanity row 2: the random direction stays within 2 points of no effect at the subject
    for layer in ("forward-1", "forward-2"):
        moved = (
            value[("subject", layer, "interchange-accuracy-random")]
            - value[("subject", layer, "unpatched-follows-source")]
        )
        assert abs(moved) <= 0.02
    probe = rows[rows.metric == "number-probe-accuracy"]
    # two folds need both numbers in each training fold: the subject and before-verb classes have them
    assert set(probe[probe.split.isin(["subject", "before-verb"])].layer) == SITES
    assert ((probe.value >= 0) & (probe.value <= 1)).all()
    assert cli.main(["report", str(out)]) == 0
    assert list(out.rglob("iia_where*")), sorted(p.name for p in out.rglob("*"))


def test_pairs_file_and_its_errors(tmp_path):
    good = tmp_path / "p.csv"
    good.write_text(
        "base,source,base_form,source_form,position,source_position,subject,source_subject\n"
        "the key is here,the old keys are here,is,are,2,3,1,2\n"
    )
    pairs = read_patch_pairs(good)
    assert pairs.candidates[0] == ("is", "are") and pairs.source_subject[0] == 2 and pairs.attractor[0] == -1
    bad = tmp_path / "b.csv"
    bad.write_text("base,source,base_form,source_form,position,source_position\nthe key is,the keys are,is,are,7,2\n")
    with pytest.raises(InputError, match="line 2, position"):
        read_patch_pairs(bad)
    (tmp_path / "c.csv").write_text("base,source\nx,y\n")
    with pytest.raises(InputError, match="base_form"):
        read_patch_pairs(tmp_path / "c.csv")
    assert np.isfinite(pairs.position[0])
