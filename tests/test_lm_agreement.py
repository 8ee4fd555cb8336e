"""probing.lm.agreement: subject-verb agreement items (and their attractors) from CoNLL-U."""

from __future__ import annotations

from pathlib import Path

from probing.corpora.conllu import read_conllu
from probing.lm.agreement import agreement_items, third_singular

# ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC
CONLLU = """\
# sent_id = keys
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tkeys\tkey\tNOUN\tNNS\tNumber=Plur\t7\tnsubj\t_\t_
3\tto\tto\tADP\tIN\t_\t5\tcase\t_\t_
4\tthe\tthe\tDET\tDT\t_\t5\tdet\t_\t_
5\tcabinet\tcabinet\tNOUN\tNN\tNumber=Sing\t2\tnmod\t_\t_
6\tare\tbe\tAUX\tVBP\tMood=Ind|Number=Plur|Tense=Pres\t7\tcop\t_\t_
7\there\there\tADV\tRB\t_\t0\troot\t_\t_
8\t.\t.\tPUNCT\t.\t_\t7\tpunct\t_\t_

# sent_id = walks
1\tThe\tthe\tDET\tDT\t_\t2\tdet\t_\t_
2\tman\tman\tNOUN\tNN\tNumber=Sing\t3\tnsubj\t_\t_
3\twatches\twatch\tVERB\tVBZ\tNumber=Sing|Person=3|Tense=Pres\t0\troot\t_\t_
4\tbirds\tbird\tNOUN\tNNS\tNumber=Plur\t3\tobj\t_\t_
5\t.\t.\tPUNCT\t.\t_\t3\tpunct\t_\t_

# sent_id = where
1\tWhere\twhere\tADV\tWRB\t_\t0\troot\t_\t_
2\tare\tbe\tAUX\tVBP\tNumber=Plur\t1\tcop\t_\t_
3\tthe\tthe\tDET\tDT\t_\t4\tdet\t_\t_
4\tdogs\tdog\tNOUN\tNNS\tNumber=Plur\t1\tnsubj\t_\t_
5\t?\t?\tPUNCT\t.\t_\t1\tpunct\t_\t_

# sent_id = pron
1\tShe\tshe\tPRON\tPRP\tNumber=Sing\t2\tnsubj\t_\t_
2\tsings\tsing\tVERB\tVBZ\tNumber=Sing\t0\troot\t_\t_

# sent_id = must
1\tDogs\tdog\tNOUN\tNNS\tNumber=Plur\t3\tnsubj\t_\t_
2\tmust\tmust\tAUX\tMD\t_\t3\taux\t_\t_
3\tbark\tbark\tVERB\tVB\t_\t0\troot\t_\t_

# sent_id = irregular
1\tPeople\tpeople\tNOUN\tNNS\tNumber=Plur\t2\tnsubj\t_\t_
2\tdo\tdo\tVERB\tVBP\tNumber=Plur\t0\troot\t_\t_
3\tdishes\tdish\tNOUN\tNNS\tNumber=Plur\t2\tobj\t_\t_

"""


def test_items_attractors_and_skips(tmp_path: Path):
    (tmp_path / "t.conllu").write_text(CONLLU)
    items, skipped = agreement_items(read_conllu(tmp_path / "t.conllu"))
    assert items.sentence_id.tolist() == ["keys", "walks", "irregular"]
    keys = items.iloc[0]
    assert keys.bad == "The keys to the cabinet is here ." and keys.attractors == 1 and keys.group == "attractors=1"
    assert keys.number == "Plur" and keys.subject == "keys"
    walks = items.iloc[1]
    # 'birds' follows the verb: not an attractor
    assert walks.bad == "The man watch birds ." and walks.attractors == 0
    assert items.iloc[2].bad == "People does dishes"  # do -> does by the regular rule
    # 'Where are the dogs ?': subject after the verb; 'She': a pronoun, not a noun item; 'must': no number
    assert dict(skipped) == {"subject after the verb": 1}


def test_third_singular():
    assert [third_singular(w) for w in ("walk", "watch", "try", "go", "play", "fix")] == [
        "walks",
        "watches",
        "tries",
        "goes",
        "plays",
        "fixes",
    ]


def test_context_vectors_are_the_halves_of_the_word_before_the_verb(tmp_path: Path):
    import numpy as np

    from probing.elmo import Elmo
    from probing.lm.agreement import agreement_probe, context_vectors

    (tmp_path / "t.conllu").write_text(CONLLU)
    items, _ = agreement_items(read_conllu(tmp_path / "t.conllu"))
    model = Elmo.random(Path(__file__).parent / "fixtures" / "elmo_allennlp" / "options.json", seed=0)
    vecs = context_vectors(items, model)
    assert list(vecs) == ["0", "1f", "1b", "2f", "2b"]
    keys = model.embed([items.good[0].split(" ")])[0]  # (3, 8, 32): 'cabinet' (position 4) precedes 'are'
    np.testing.assert_allclose(vecs["1f"][0], keys[1, 4, :16], atol=1e-5)
    np.testing.assert_allclose(vecs["2b"][0], keys[2, 4, 16:], atol=1e-5)
    np.testing.assert_allclose(vecs["0"][0], keys[0, 4, :16], atol=1e-5)
    rows = agreement_probe(items, items, model, n_boot=50)
    assert set(rows.layer) == {"0", "1f", "1b", "2f", "2b"}
    overall = rows[rows.group == "overall"].set_index("layer")
    per_group = rows[rows.group != "overall"]
    for layer, part in per_group.groupby("layer"):
        # overall accuracy = the item-weighted mean of the attractor groups'
        assert overall.accuracy[layer] == np.average(part.accuracy, weights=part.n)
