"""The ``arrayviews`` console command: create, load, query and inspect arrays, and run the demo.

Errors are printed as one line (``error: ...``) on standard error and the command exits with status
1; Spark prints nothing unless ``--verbose`` or ``--log-level`` asks for its log (then the full
error report follows the line).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from arrayviews.execution.failures import PYSPARK_ERROR_LOGGERS
from arrayviews.execution.session import LOG_LEVEL_VARIABLE, LOG_LEVELS
from arrayviews.model.errors import ArrayViewsError, ExecutionError

WAREHOUSE_HELP = "Warehouse folder or file system URL (default ./warehouse, or $ARRAYVIEWS_WAREHOUSE)."
FORMATS = ("table", "csv", "json")


def output_format(command):
    """The ``--format table|csv|json`` option of every command that prints relations."""
    return click.option(
        "--format",
        "output",
        type=click.Choice(FORMATS, case_sensitive=False),
        default="table",
        show_default=True,
        help="How relations are printed: a table fitting the terminal, CSV, or JSON (a list of rows).",
    )(command)


class StatementHelp(click.Command):
    """A command whose help ends with the summary of the statements (keeps its lines as written)."""

    def format_epilog(self, context: click.Context, formatter: click.HelpFormatter) -> None:
        from arrayviews.cli.statements import summary_lines

        formatter.write("\n")
        for line in summary_lines():
            formatter.write(line + "\n")


class Context:
    """Opens the database lazily, so ``--help`` never starts Spark."""

    def __init__(self, warehouse: str | None, master: str | None, catalog_uri: str | None) -> None:
        self.warehouse, self.master, self.catalog_uri = warehouse, master, catalog_uri
        self._db = None

    @classmethod
    def of(cls, database) -> Context:
        """A context on a database that is already open (a caller running commands in-process)."""
        context = cls(database.warehouse.location, None, None)
        context._db = database
        return context

    @property
    def db(self):
        if self._db is None:
            import arrayviews

            self._db = arrayviews.connect(self.warehouse, master=self.master, catalog_uri=self.catalog_uri)
        return self._db


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="arrayviews", prog_name="arrayviews", message="%(prog)s %(version)s")
@click.option("--warehouse", envvar="ARRAYVIEWS_WAREHOUSE", default=None, help=WAREHOUSE_HELP)
@click.option("--master", default=None, help="Spark master URL (default local[*]).")
@click.option("--catalog-uri", default=None, help="SQL catalog URL (default: SQLite file in the warehouse).")
@click.option("-v", "--verbose", is_flag=True, help="Show Spark's log (level WARN) and full error reports.")
@click.option(
    "--log-level",
    type=click.Choice(LOG_LEVELS, case_sensitive=False),
    default=None,
    help="Spark's log level (default OFF, or $ARRAYVIEWS_LOG_LEVEL).",
)
@click.pass_context
def cli(
    context: click.Context,
    warehouse: str | None,
    master: str | None,
    catalog_uri: str | None,
    verbose: bool,
    log_level: str | None,
) -> None:
    """arrayviews: multi-dimensional arrays and materialized array views on Apache Spark."""
    level = log_level or ("WARN" if verbose else None)
    if level is not None:
        os.environ[LOG_LEVEL_VARIABLE] = level.upper()
    if not _verbose():
        quiet_pyspark_errors()
    if not isinstance(context.obj, Context):  # an open database given by an in-process caller stays
        context.obj = Context(warehouse, master, catalog_uri)


@cli.command()
@click.argument("schema")
@click.pass_obj
def create(context: Context, schema: str) -> None:
    """Create an empty array, e.g. 'A<v:float64>[i=1:1000:100; j=1:1000:100]'."""
    array = context.db.create_array(schema)
    click.echo(f"created {array.schema.to_text()}")


@cli.command()
@click.argument("array")
@click.argument("path")
@click.option("--format", "file_format", type=click.Choice(["csv", "parquet"]), default=None)
@click.option("--replace", is_flag=True, help="Overwrite cells that already exist.")
@click.pass_obj
def load(context: Context, array: str, path: str, file_format: str | None, replace: bool) -> None:
    """Insert the cells of a CSV or Parquet file (one column per dimension and attribute)."""
    result = context.db.array(array).load(path, file_format, on_conflict="replace" if replace else "error")
    click.echo(str(result))


@cli.command(cls=StatementHelp)
@click.argument("statement", required=False)
@click.option(
    "-f",
    "--file",
    "script",
    type=click.Path(exists=True, dir_okay=False),
    help="Read statements from a file.",
)
@output_format
@click.pass_obj
def sql(context: Context, statement: str | None, script: str | None, output: str) -> None:
    """Run statements of the statement language and print the result of the last one."""
    from arrayviews.cli.render import show
    from arrayviews.language.parser import parse_statements

    if statement is None and script is None:
        raise click.UsageError("give a statement or --file (-f script.sql)")
    if statement is not None and script is not None:
        raise click.UsageError("give a statement or --file, not both")
    text = statement if script is None else _script_text(script)
    parse_statements(text)  # a syntax error is reported before Spark starts
    show(context.db.sql(text), output=output.lower())


def _script_text(path: str) -> str:
    """The text of a script file, which must be UTF-8 (a usage error names the first bad byte); a
    byte order mark at its start (as some Windows editors write) is dropped."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        from arrayviews.model.text_lines import position

        before = data[: error.start].decode("utf-8-sig")
        line = position(before, len(before))[0]
        raise click.UsageError(
            f"script {path} is not UTF-8 text: byte 0x{data[error.start]:02x} on line {line} "
            "(save it as UTF-8)"
        ) from None


@cli.command()
@click.option(
    "--history",
    default=None,
    help="History file (default ~/.arrayviews_history, or $ARRAYVIEWS_HISTORY).",
)
@output_format
@click.pass_obj
def shell(context: Context, history: str | None, output: str) -> None:
    """An interactive statement shell on one warm session: statements end with ';' and may span
    lines, Tab completes keywords and relation names, \\help lists the shell commands, \\q leaves."""
    from arrayviews.cli.shell import run_shell

    run_shell(lambda: context.db, history=history, output=output.lower())


@cli.command()
@output_format
@click.pass_obj
def arrays(context: Context, output: str) -> None:
    """List the arrays of the warehouse with their schema, version and cell count."""
    from arrayviews.cli.render import show

    show(context.db.describe(), title="arrays", output=output.lower())


@cli.command()
@click.argument("array")
@output_format
@click.pass_obj
def chunks(context: Context, array: str, output: str) -> None:
    """Chunk statistics of an array (read from metadata only)."""
    from arrayviews.cli.render import show

    show(context.db.array(array).chunks(), title=f"chunks of {array}", output=output.lower())


@cli.command()
@click.argument("array")
@output_format
@click.pass_obj
def versions(context: Context, array: str, output: str) -> None:
    """The versions of an array with time, operation and cell counts."""
    from arrayviews.cli.render import show

    frame = context.db.array(array).versions().drop(columns=["snapshot_id"])
    show(frame, title=f"versions of {array}", output=output.lower())


@cli.command()
@click.argument("array")
@click.argument("output", type=click.Path(dir_okay=False, writable=True))
@click.option(
    "--attr", "attribute", default=None, help="The attribute to draw (needed when there are several)."
)
@click.option(
    "--dpi", default=100, show_default=True, type=click.IntRange(min=1), help="Resolution of the picture."
)
@click.pass_obj
def plot(context: Context, array: str, output: str, attribute: str | None, dpi: int) -> None:
    """Draw a 1-D array (a line) or a 2-D array (an image with its coordinates) into a PNG file."""
    from arrayviews.plotting import save_plot

    click.echo(f"wrote {save_plot(context.db.array(array), output, attribute, dpi)}")


@cli.command()
@click.option("--repair", is_flag=True, help="Restore or drop broken relations and delete orphaned files.")
@click.option(
    "--grace-minutes",
    type=float,
    default=60.0,
    show_default=True,
    help="Leave orphaned files younger than this alone (a write in progress may own them).",
)
@click.pass_obj
def check(context: Context, repair: bool, grace_minutes: float) -> None:
    """List relations that cannot be read (missing metadata or data files) and orphaned files;
    with --repair, fix what can be fixed. Exits with status 1 while problems remain."""
    import datetime as dt

    report = context.db.check(repair=repair, orphans_older_than=dt.timedelta(minutes=grace_minutes))
    click.echo(str(report))
    if not report.healthy:
        sys.exit(1)


@cli.command()
@click.argument("array")
@click.pass_obj
def compact(context: Context, array: str) -> None:
    """Rewrite an array's small data files into large ones."""
    click.echo(str(context.db.array(array).compact()))


@cli.command()
@click.option("--batches", default=8, show_default=True, help="Number of batches the image arrives in.")
@click.option(
    "--nights", default=8, show_default=True, help="Nightly sky-catalog batches after the initial load."
)
@click.pass_obj
def demo(context: Context, batches: int, nights: int) -> None:
    """The main job: a Hubble image through array operators, then a sky catalog whose galaxy-group
    view is kept fresh incrementally night by night."""
    from arrayviews.cli.demo import run_demo

    run_demo(context.db, batches=batches, nights=nights)


from arrayviews.cli.maintain import maintain  # noqa: E402 - the command module needs cli's options

cli.add_command(maintain)


def _verbose() -> bool:
    return os.environ.get(LOG_LEVEL_VARIABLE, "OFF").upper() != "OFF"


def quiet_pyspark_errors() -> None:
    """Silence PySpark's error loggers (they print each failed query's Java stack trace on standard
    error, before arrayviews reports the error in one line) and its warnings (a failed ``toPandas``
    warns with the whole Spark error first); ``--verbose`` keeps them."""
    import logging
    import warnings

    from pyspark.logger import PySparkLogger

    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)
    warnings.filterwarnings("ignore", module=r"pyspark(\.|$)")


def report(error: ArrayViewsError) -> None:
    """One line on standard error; with a log level, the full message and Spark's report after it."""
    text = str(error)
    click.secho(f"error: {text.splitlines()[0] if text else type(error).__name__}", fg="red", err=True)
    if _verbose():
        rest = "\n".join(text.splitlines()[1:])
        details = getattr(error, "details", "")
        for part in (rest, details):
            if part:
                click.echo(part, err=True)


def main() -> None:
    from arrayviews.execution.failures import translated_errors

    try:
        with translated_errors():  # results rendered here (Spark SQL frames) run Spark jobs too
            cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as error:
        error.show()
        sys.exit(error.exit_code)
    except ArrayViewsError as error:
        report(error)
        sys.exit(1)
    except KeyboardInterrupt:
        sys.exit(130)
    except OSError as error:  # the file system refused (a file where a folder is expected, no space)
        if _verbose():
            raise
        click.secho(f"error: {error}", fg="red", err=True)
        sys.exit(1)
    except Exception as error:  # noqa: BLE001 - a bug: still one line unless asked for the trace
        if _verbose():
            raise
        report(
            ExecutionError(
                f"internal error: {type(error).__name__}: {error} (run with --verbose for the trace)"
            )
        )
        sys.exit(1)


if __name__ == "__main__":
    main()
