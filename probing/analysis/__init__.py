"""Analyses that are not probes: what a representation or a model does beyond a probe's accuracy on one layer.

One module per analysis: :mod:`~probing.analysis.similarity` (CKA, CCA, SVCCA, PWCCA between layers),
:mod:`~probing.analysis.erasure` (concept erasure on stored layers: LEACE, INLP, the random control) and
:mod:`~probing.analysis.intervention` (erasing inside the biLM, and its effect on the LM) and
:mod:`~probing.analysis.contextuality` (Ethayarajh's geometry of contextual vectors, read by the ``contextuality``
task kind). Each is a library of
plain functions on stores, encoders and models, usable on its own. A new analysis reaches an experiment file
as a task option (:class:`probing.tasks.TaskOption`; DESIGN.md, "Adding an analysis"), as ``erase`` does; the
``[similarity]`` table and an ELMo encoder's ``intervene`` key are the two routes that predate it. Nothing is
imported here: ``import probing.analysis`` loads no analysis (torch, scipy) until one of its modules is.
"""
