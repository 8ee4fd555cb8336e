"""The probes pass scikit-learn's estimator checks (all apply; none is marked as expected to fail): LinearProbe,
ScalarMixProbe (scikit-learn's 2-D data is one layer, its default ``n_layers``), their CV forms (fit without dev
data: every 10th row is the dev data; a two-point grid, to keep the checks' many fits short) and MLPProbe."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from probing.probes.linear import LinearProbe, LinearProbeCV
from probing.probes.mix import ScalarMixProbe, ScalarMixProbeCV
from probing.probes.mlp import MLPProbe


@parametrize_with_checks(
    [LinearProbe(), ScalarMixProbe(), LinearProbeCV(Cs=(0.1, 10.0)), ScalarMixProbeCV(Cs=(0.1, 10.0)), MLPProbe()]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
