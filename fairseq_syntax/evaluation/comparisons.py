"""What a seeds table tests, as a value: the baseline, each control's method and kind, the seeds planned, the rule.

These are the study's choices, never read from the systems' names: :class:`Comparisons` holds them, the results
table, its answer and its figure take one, and RESULTS.json records it (:meth:`Comparisons.to_json`); the method
registry's: :func:`registry_comparisons`."""
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fairseq_syntax.core.control_kinds import CONTROLS

DEFAULT_ALPHA = 0.05
DEFAULT_METRICS = ("BLEU", "chrF")


@dataclass(frozen=True)
class Comparisons:
    """The comparisons of a seeds table: every system is tested against ``baseline`` (None: each method against its
    controls only); ``controls``: control system -> (method system, kind of
    :data:`~fairseq_syntax.core.control_kinds.CONTROLS`), in listing order; ``planned_seeds``: seeds per system
    (empty: no plan); ``expected``: the study's systems in order; ``alpha``: the verdict rule's level; ``metrics``:
    the metrics the rule reads, the first the headline."""
    baseline: str | None = None
    controls: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    planned_seeds: Mapping[str, int] = field(default_factory=dict)
    expected: tuple[str, ...] = ()
    alpha: float = DEFAULT_ALPHA
    metrics: tuple[str, ...] = DEFAULT_METRICS

    def __post_init__(self):
        # stored as plain dicts and tuples of their own: a caller's dict changed later does not change these
        object.__setattr__(self, "controls", {name: tuple(pair) for name, pair in dict(self.controls).items()})
        for name, kind in (("planned_seeds", dict), ("expected", tuple), ("metrics", tuple)):
            object.__setattr__(self, name, kind(getattr(self, name)))
        problems = []
        if self.baseline is not None and (not isinstance(self.baseline, str) or not self.baseline):
            problems.append(f"baseline: a system name or none, got {self.baseline!r}")
        for control, pair in self.controls.items():
            if len(pair) != 2 or not all(isinstance(part, str) and part for part in pair):
                problems.append(f"controls.{control}: (method system, control kind), got {pair!r}")
                continue
            method, kind = pair
            if kind not in CONTROLS:
                problems.append(f"controls.{control}: kind {kind!r} is not one of {', '.join(CONTROLS)}")
            if method == control:
                problems.append(f"controls.{control}: a control of itself")
            elif method in self.controls:
                problems.append(f"controls.{control}: its method {method} is itself a control")
            if control == self.baseline:
                problems.append(f"controls.{control}: the baseline cannot be a control")
        for name, seeds in self.planned_seeds.items():
            if not isinstance(seeds, int) or isinstance(seeds, bool) or seeds < 1:
                problems.append(f"planned_seeds.{name}: a positive number of seeds, got {seeds!r}")
        repeated = sorted({name for name in self.expected if self.expected.count(name) > 1})
        if repeated:
            problems.append(f"expected: {', '.join(repeated)} listed more than once")
        if not isinstance(self.alpha, (int, float)) or isinstance(self.alpha, bool) or not 0 < self.alpha < 1:
            problems.append(f"alpha: a level between 0 and 1, got {self.alpha!r}")
        if not self.metrics or len(set(self.metrics)) != len(self.metrics):
            problems.append(f"metrics: one or more distinct metric names, got {list(self.metrics)!r}")
        if problems:
            raise ValueError("comparisons: " + "; ".join(problems))

    def method_of(self, name: str) -> str | None:
        """The method system ``name`` is a control of, else None."""
        return self.controls[name][0] if name in self.controls else None

    def controls_of(self, method: str) -> list[tuple[str, str]]:
        """(control system, kind) of each control of ``method``, in the order of :attr:`controls`."""
        return [(control, kind) for control, (of, kind) in self.controls.items() if of == method]

    @property
    def kinds(self) -> list[str]:
        """The control kinds of :attr:`controls`, in order of first appearance."""
        return list(dict.fromkeys(kind for _, kind in self.controls.values()))

    def to_json(self) -> dict[str, Any]:
        """The comparisons as RESULTS.json records them (:meth:`from_json` reads them back)."""
        return {"baseline": self.baseline,
                "controls": {control: {"method": method, "kind": kind}
                             for control, (method, kind) in self.controls.items()},
                "planned_seeds": dict(self.planned_seeds), "expected": list(self.expected), "alpha": self.alpha,
                "metrics": list(self.metrics)}

    @classmethod
    def from_json(cls, data: Any, where: str = "comparisons") -> "Comparisons":
        """The comparisons :meth:`to_json` wrote; a ValueError naming ``where`` and the key for anything else."""
        if not isinstance(data, dict):
            raise ValueError(f"{where}: an object of the comparisons, got {type(data).__name__}")
        unknown = sorted(set(data) - {"baseline", "controls", "planned_seeds", "expected", "alpha", "metrics"})
        if unknown:
            raise ValueError(f"{where}: unknown keys {', '.join(unknown)}")
        controls = data.get("controls", {})
        if not isinstance(controls, dict) or not all(
                isinstance(pair, dict) and set(pair) == {"method", "kind"} for pair in controls.values()):
            raise ValueError(f"{where}.controls: an object of control system -> {{\"method\", \"kind\"}}")
        for key, kind in (("planned_seeds", dict), ("expected", list), ("metrics", list)):
            if key in data and not isinstance(data[key], kind):
                raise ValueError(f"{where}.{key}: a JSON {'object' if kind is dict else 'array'}, got "
                                 f"{type(data[key]).__name__}")
        try:
            return cls(baseline=data.get("baseline"),
                       controls={name: (pair["method"], pair["kind"]) for name, pair in controls.items()},
                       planned_seeds=data.get("planned_seeds", {}), expected=tuple(data.get("expected", ())),
                       alpha=data.get("alpha", DEFAULT_ALPHA), metrics=tuple(data.get("metrics", DEFAULT_METRICS)))
        except ValueError as error:
            raise ValueError(f"{where}: {str(error).removeprefix('comparisons: ')}") from None


def registry_comparisons(baseline: str | None = None, controls: Mapping[str, tuple[str, str]] | None = None,
                         planned_seeds: Mapping[str, int] | None = None, **options) -> Comparisons:
    """:class:`Comparisons` with the registry's defaults for what is not given (``baseline``:
    :func:`fairseq_syntax.methods.words_baseline`; ``controls``: :func:`fairseq_syntax.methods.control_pairs`);
    expected systems are those of ``planned_seeds``, in order. ``options``: ``alpha``, ``metrics``."""
    from fairseq_syntax.methods import control_pairs, words_baseline

    planned_seeds = dict(planned_seeds or {})
    return Comparisons(baseline=words_baseline() if baseline is None else baseline,
                       controls=control_pairs() if controls is None else controls,
                       planned_seeds=planned_seeds, expected=tuple(planned_seeds), **options)
