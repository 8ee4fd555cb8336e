"""The metrics the built-in task kinds emit, each defined once; a kind lists the ones it emits (and names its
headline) in its :class:`~probing.tasks.common.TaskKind`, and registering the kind registers them. They are
also registered when :mod:`probing.results` is imported (this module needs no probe code), so the results
tables, the figures and the report label, bound and orient them without importing the kinds."""

from __future__ import annotations

import math

from probing.results.schema import Metric, register_metric

_FRACTION, _SIGNED, _SPEARMAN, _POSITIVE = (0.0, 1.0), (-1.0, 1.0), (-1.0, 1.0), (0.0, math.inf)

F1 = Metric("f1", "F1 (%)", True, _FRACTION)
ACCURACY = Metric("accuracy", "accuracy (%)", True, _FRACTION)
CONTROL_ACCURACY = Metric("control-accuracy", "control-task accuracy (%)", True, _FRACTION)
SELECTIVITY = Metric("selectivity", "selectivity (percentage points)", True, _SIGNED)
BEST_LAYER_MARGIN = Metric("best-layer-margin", "best single layer minus the next (percentage points)", True, _SIGNED)
# structural probes (Hewitt & Manning 2019): UUAS and Root% are fractions, DSpr./NSpr. Spearman correlations
UUAS = Metric("uuas", "UUAS (%)", True, _FRACTION)
DSPR = Metric("dspr", "DSpr. (Spearman)", False, _SPEARMAN)
ROOT_ACC = Metric("root_acc", "Root (%)", True, _FRACTION)
NSPR = Metric("nspr", "NSpr. (Spearman)", False, _SPEARMAN)
CONTROL_UUAS = Metric("control-uuas", "control-task UUAS (%)", True, _FRACTION)
CONTROL_DSPR = Metric("control-dspr", "control-task DSpr. (Spearman)", False, _SPEARMAN)
CONTROL_ROOT_ACC = Metric("control-root_acc", "control-task Root (%)", True, _FRACTION)
CONTROL_NSPR = Metric("control-nspr", "control-task NSpr. (Spearman)", False, _SPEARMAN)
OOV_RATE = Metric("oov-rate", "out-of-vocabulary tokens (%)", True, _FRACTION, higher_is_better=False)
# oov_split = true (issue 21): accuracy on the tokens inside (iv) / outside (oov) GloVe's vocabulary and the
# bundled model's training vocabulary
OOV_SPLIT = (
    Metric("accuracy-iv-glove", "accuracy on words in GloVe's vocabulary (%)", True, _FRACTION),
    Metric("accuracy-oov-glove", "accuracy on words outside GloVe's vocabulary (%)", True, _FRACTION),
    Metric("accuracy-iv-train", "accuracy on words in the model's training vocabulary (%)", True, _FRACTION),
    Metric("accuracy-oov-train", "accuracy on words outside the model's training vocabulary (%)", True, _FRACTION),
)
# MDL probing (Voita & Titov 2020), on the training split: online and uniform codelength in kbits (1000 bits),
# compression = uniform / online (1 = nothing learnt)
MDL = (
    Metric("codelength_kbits", "online codelength (kbits)", bounds=_POSITIVE, higher_is_better=False),
    Metric("uniform_kbits", "uniform codelength (kbits)", bounds=_POSITIVE, higher_is_better=False),
    Metric("compression", "compression (uniform / online)", bounds=_POSITIVE),
    Metric(
        "control-codelength_kbits",
        "control-task online codelength (kbits)",
        bounds=_POSITIVE,
        higher_is_better=False,
    ),
)
# minimal pairs (issue 29): the share of pairs whose differing words are all in the LM head's vocabulary, and
# the accuracy on those pairs
COVERAGE = Metric("coverage", "pairs with every differing word in the LM's vocabulary (%)", True, _FRACTION)
ACCURACY_COVERED = Metric("accuracy_covered", "accuracy on covered pairs (%)", True, _FRACTION)

TAGGING_METRICS = (ACCURACY, CONTROL_ACCURACY, SELECTIVITY, BEST_LAYER_MARGIN, OOV_RATE, *OOV_SPLIT)
WSD_METRICS = (F1, BEST_LAYER_MARGIN)
DISTANCE_METRICS = (UUAS, DSPR, CONTROL_UUAS, CONTROL_DSPR, SELECTIVITY)
DEPTH_METRICS = (ROOT_ACC, NSPR, CONTROL_ROOT_ACC, CONTROL_NSPR, SELECTIVITY)
MINIMAL_PAIRS_METRICS = (ACCURACY, COVERAGE, ACCURACY_COVERED)

# registry order: where a results table without provenance has several kinds' headlines for one task, the
# first in this order wins (F1 before accuracy: a WSD task's rows may include accuracy)
for _metric in (F1, *TAGGING_METRICS, *MDL, *DISTANCE_METRICS, *DEPTH_METRICS, *MINIMAL_PAIRS_METRICS):
    register_metric(_metric)
