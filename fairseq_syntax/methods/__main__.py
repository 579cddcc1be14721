"""``python -m fairseq_syntax.methods COMMAND``: the systems and the method tables of the README and docs/methods.md,
from the method descriptions (:data:`fairseq_syntax.methods.METHODS`).

``--help`` lists the commands and what each prints."""
import argparse
import sys

import fairseq_syntax
from fairseq_syntax.methods import METHODS, systems


def _side_data_text(method) -> str:
    """Its side inputs, each with how it is made (loads the plugin, hence torch and fairseq)."""
    fairseq_syntax.register()
    from fairseq_syntax.core.side_inputs import SIDE_INPUTS

    names = sorted({name for system in method.systems for name in system.side_inputs})
    return ", ".join(f"`{name}` ({SIDE_INPUTS[name].made_by})" for name in names) or "none"


def readme_table() -> str:
    """The README's table: per method the paper, the architecture, the data directory and side data it needs."""
    rows = ["| method | paper | arch (+ `_tiny`) | input | side data |", "|---|---|---|---|---|"]
    for method in METHODS:
        own = [system for system in method.systems if not system.baseline]
        inputs = ", ".join(dict.fromkeys(f"`{system.data}`" for system in own))
        side = _side_data_text(method)
        archs = ", ".join(f"`{arch}`" for arch in method.archs)
        rows.append(f"| {method.title} | {method.citation} | {archs} | {inputs} | {side} |")
    return "\n".join(rows)


def docs_table() -> str:
    """The table of docs/methods.md: every system of every method, with its role and the method's notes."""
    rows = ["| method | paper | registered archs (+ `_tiny`) | systems (`NAME:ARCH:DATA`) | side inputs | notes |",
            "|---|---|---|---|---|---|"]
    for method in METHODS:
        specs = "<br>".join(f"`{s.spec()}`" + (" (baseline)" if s.baseline else "") +
                            (" (ablation)" if s.ablation else "") + (f" (control: {s.control})" if s.control else "")
                            + ("" if s.task == "translation" else f" ({s.task})")
                            for s in method.systems_with_controls)
        archs = ", ".join(f"`{arch}`" for arch in method.archs)
        side_text = _side_data_text(method)
        rows.append(f"| {method.title} (`methods/{method.name}`) | {method.citation} | {archs} | {specs} | "
                    f"{side_text} | {method.notes} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m fairseq_syntax.methods", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    listing = commands.add_parser("systems", help="the translation systems' specs NAME:ARCH:DATA[:EXTRA], one a line")
    listing.add_argument("--no-ablations", action="store_true")
    listing.add_argument("--controls", action="store_true", help="with the systems on control structures")
    commands.add_parser("readme-table", help="the README's compact method table")
    commands.add_parser("docs-table", help="the full method table of docs/methods.md")
    args = parser.parse_args(argv)
    if args.command == "systems":
        for system in systems(ablations=not args.no_ablations, controls=args.controls):
            print(system.spec())
    elif args.command == "docs-table":
        print(docs_table())
    else:
        print(readme_table())


if __name__ == "__main__":
    main(sys.argv[1:])
