"""The parser (one module per command group adds its own) and `main`: every error in one line."""

import argparse
import logging
import os
import sys
from pathlib import Path

import dagster as dg

from cli import (
    datasets,
    demo,
    evaluate,
    explore,
    ingest,
    label,
    labels,
    piece_values,
    query,
    reproduce,
    selfplay,
    train,
    ui,
)
from cli.runtime import DEBUG_VARIABLE, debugging, set_command
from pipeline.store.store import default_root
from pipeline.store.store_files import no_space_error


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line: what is wrong and where the help is."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see `{self.prog} --help`)\n")


HOME_HELP = (
    "store root (default: $CHESS_PIPELINE_HOME, else ./store); before or after the command, "
    "and given on both sides the one after the command wins"
)


def add_home(parser: argparse.ArgumentParser, default=None) -> None:
    """--home, the one declaration of the store flag, on the main parser (default None) and on
    every command's (default SUPPRESS: given after the command it replaces the one before,
    absent it leaves that one as it is)."""
    parser.add_argument("--home", default=default, help=HOME_HELP)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="chess-pipeline", description="PGN archives -> position store -> evaluators")
    add_home(p)
    p.add_argument(
        "--debug", action="store_true", help="show the Python traceback of an error (also: CHESS_PIPELINE_DEBUG=1)"
    )
    sub = p.add_subparsers(dest="command", required=True)
    ingest.add_parser(sub)
    demo.add_parser(sub)
    label.add_parser(sub)
    labels.add_parser(sub)
    datasets.add_parser(sub)
    train.add_parser(sub)
    evaluate.add_parser(sub)
    query.add_parsers(sub)
    ui.add_parser(sub)
    explore.add_parser(sub)
    selfplay.add_parser(sub)
    piece_values.add_parser(sub)
    reproduce.add_parser(sub)
    for command in {id(c): c for c in sub.choices.values()}.values():  # an alias is the same parser
        for parser in (command, *getattr(command, "subcommands", ())):  # and `labels export`'s
            add_home(parser, default=argparse.SUPPRESS)
    return p


BAD_INPUT = (
    ValueError,
    LookupError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)
"""Errors that mean a wrong argument, path or query: their message is what the user needs."""


def one_line(text: str) -> str:
    """An error message as one line: its lines joined, up to DuckDB's `LINE 1: ...` excerpt."""
    lines = []
    for line in text.splitlines():
        if line.strip().startswith("LINE ") and lines:
            break
        if line.strip():
            lines.append(line.strip())
    return " ".join(lines)


def error_line(e: BaseException, args) -> str:
    """What went wrong, in one line, for an exception no command turned into a message."""
    import duckdb

    from pipeline.labels.uci import EngineNotFound

    full = no_space_error(e, [Path(os.environ.get("DAGSTER_HOME") or "."), Path(str(args.home or default_root()))])
    if full is not None:
        return full
    while isinstance(e, dg.DagsterUserCodeExecutionError) and e.user_exception is not None:
        e = e.user_exception  # the error of our code inside a run, not Dagster's wrapper
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    if isinstance(e, (*BAD_INPUT, EngineNotFound, duckdb.Error, OSError)):
        return one_line(str(e)) or type(e).__name__
    return (
        f"{type(e).__name__}: {one_line(str(e))} (unexpected; run again with --debug, or "
        "CHESS_PIPELINE_DEBUG=1, for the traceback)"
    )


class _NoTracebackLogger(logging.Logger):
    """Dagster's console logger is built from logging.getLoggerClass(); with this class its
    failure records keep their first line only, not the stack trace Dagster appends: the CLI
    prints the cause itself, in one line (the run's page in the UI keeps the whole trace)."""

    def handle(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.ERROR:
            text = record.getMessage()
            if "Stack Trace:" in text or "Traceback (most recent call last)" in text:
                record.msg, record.args = text.split("\n", 1)[0], ()
        super().handle(record)


def main(argv: list[str] | None = None) -> None:
    """The CLI. Every error ends in one line on stderr (what is wrong; the message says what to
    do) and a non-zero exit: 1, or 130 when interrupted; --debug shows the traceback instead."""
    args = build_parser().parse_args(argv)
    before = os.environ.get(DEBUG_VARIABLE)
    if args.debug:  # one switch, read by the runtime and the runs' processes, for this command only
        os.environ[DEBUG_VARIABLE] = "1"
    try:
        _run(args)
    finally:
        if args.debug and before is None:
            del os.environ[DEBUG_VARIABLE]
        elif args.debug:
            os.environ[DEBUG_VARIABLE] = before


def _run(args: argparse.Namespace) -> None:
    debug = debugging()
    set_command(args.command)
    if not debug:
        logging.setLoggerClass(_NoTracebackLogger)
    try:
        args.func(args)
    except KeyboardInterrupt:
        if debug:
            raise
        print(f"chess-pipeline {args.command}: interrupted", file=sys.stderr)
        raise SystemExit(130) from None
    except BrokenPipeError:
        # The reader went away (`... | head`): as Unix tools do, stop quietly. Python would
        # report the pipe again when it flushes stdout at exit, so point stdout at /dev/null.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141 if not debug else 1) from None
    except Exception as e:
        if debug:
            raise
        raise SystemExit(f"chess-pipeline {args.command}: {error_line(e, args)}") from None
