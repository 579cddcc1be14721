"""What a parsing run reports: sentences, speed, and every sentence that got a fallback structure, with its 1-based
line and reason, on the console and in a ``.skipped`` file (``LINE<TAB>REASON``, written even when empty)."""
from __future__ import annotations

from dataclasses import dataclass, field

SHOWN_LINES = 20  # line numbers printed on the console; the .skipped file has all of them


@dataclass
class ParseReport:
    sentences: int = 0
    seconds: float = 0.0
    fallbacks: list[tuple[int, str]] = field(default_factory=list)  # (1-based line, reason)
    earlier: int = 0  # sentences an earlier run parsed (the shards a resumed run kept): not in the rate

    @property
    def sentences_per_second(self) -> float:
        return self.sentences / self.seconds if self.seconds > 0 else float("inf")

    def summary(self) -> str:
        text = (f"parsed {self.sentences} sentences in {self.seconds:.1f} s ({self.sentences_per_second:.1f} "
                f"sentences/s){f', {self.earlier} more by an earlier run' if self.earlier else ''}; "
                f"{len(self.fallbacks)} got the flat fallback structure")
        if self.fallbacks:
            shown = ", ".join(str(line) for line, _ in self.fallbacks[:SHOWN_LINES])
            more = f" and {len(self.fallbacks) - SHOWN_LINES} more" if len(self.fallbacks) > SHOWN_LINES else ""
            text += f" (lines {shown}{more})"
        return text

    def write_skipped(self, path: str) -> None:
        with open(path, "w", encoding="utf-8") as out:
            for line, reason in self.fallbacks:
                out.write(f"{line}\t{' '.join(reason.split())}\n")  # error messages may span lines
