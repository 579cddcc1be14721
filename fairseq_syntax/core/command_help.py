"""``fairseq-train``/``-generate``/``-interactive --user-dir fairseq_syntax --task TASK --help`` lists the task's
options.

fairseq's ``options.parse_args_and_arch`` parses twice, the second time with the task's and model's options, but
acts on ``--help`` in the first. :func:`list_task_options_in_help` wraps it so the first parse passes over
``-h``/``--help`` and the second prints the help. :func:`option` declares one."""
import functools
import sys
from dataclasses import field

HELP_OPTIONS = ("-h", "--help")


def option(default, help: str):
    """A fairseq options dataclass field: its default and ``--help``."""
    return field(default=default, metadata={"help": help})


def list_task_options_in_help() -> None:
    """Wrap fairseq's ``options.parse_args_and_arch`` (once per process), see the module docstring."""
    from fairseq import options

    if getattr(options.parse_args_and_arch, "lists_task_options", False):
        return
    parse_args_and_arch = options.parse_args_and_arch

    @functools.wraps(parse_args_and_arch)
    def wrapped(parser, input_args=None, *args, **kwargs):
        given = sys.argv[1:] if input_args is None else input_args
        if any(arg in HELP_OPTIONS for arg in given):
            first_parse = parser.parse_known_args

            def first_parse_without_help(args=None, namespace=None):
                del parser.parse_known_args  # the later parses are argparse's own, --help included
                return first_parse([arg for arg in (given if args is None else args) if arg not in HELP_OPTIONS],
                                   namespace)

            parser.parse_known_args = first_parse_without_help
        return parse_args_and_arch(parser, input_args, *args, **kwargs)

    wrapped.lists_task_options = True
    options.parse_args_and_arch = wrapped
