"""``kit report table`` (a results table from verified reports) and ``kit report attest``
(an in-toto Statement for a report)."""

from __future__ import annotations

from pathlib import Path

import click

from kit.cli.options import examples
from kit.cli.signers import allow_unsigned_option, allow_untrusted_option, keys_option, signers


@click.command(
    "table",
    epilog=examples(
        "kit report table examples/reports/*.report.json --keys examples/keys",
        "kit report table reports/*/report.json --keys keys/ -o BENCHMARKS.md --html table.html",
        "kit report table downloaded/*.json --keys keys/ --include-unverified",
    ),
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--keys",
    "keys_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Folder of the signers' public keys (every *.pub in it); a report must be signed by "
    "one of them.",
)
@click.option(
    "-o", "--output", type=click.Path(dir_okay=False), help="Markdown file (default: stdout)."
)
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Also write one self-contained page: sortable columns, a filter, best for my rig.",
)
@click.option(
    "--include-unverified",
    is_flag=True,
    help="List reports that do not verify in a separate Unverified section instead of "
    "failing (exit 1).",
)
def report_table(
    paths: tuple[str, ...],
    keys_dir: str,
    output: str | None,
    html_path: str | None,
    include_unverified: bool,
) -> None:
    """A Club-3090-style results table (BENCHMARKS.md) from verified reports only: each is
    verified item by item as by `kit report verify`, against the key in --keys whose
    fingerprint its signature names. Rows group by model × rig × engine. An unsigned report,
    one signed by a key not in --keys or one failing any item exits 1 naming each file and why,
    unless --include-unverified; a file that is not a report exits 2.
    """
    from kit.report.table import build_table, markdown, require_verified

    table = build_table([Path(p) for p in paths], Path(keys_dir))
    if not include_unverified:
        require_verified(table)
    text = markdown(table)
    if html_path:
        from kit.report.html.table import write_table_page

        write_table_page(table, Path(html_path))
    if output:
        out = Path(output)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    else:
        click.echo(text, nl=False)


@click.command("attest", epilog=examples("kit report attest report.json -o report.intoto.json"))
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    default=None,
    help="Private key to sign with (default: $KIT_SIGNING_KEY, else kit's key).",
)
@keys_option
@allow_untrusted_option
@allow_unsigned_option
def report_attest(
    path: str,
    out: str,
    signing_key: str | None,
    keys_dir: str | None,
    allow_untrusted: bool,
    allow_unsigned: bool,
) -> None:
    """Write an in-toto Statement v1 for the report PATH (subject: its file name and sha256),
    signed as a DSSE envelope of application/vnd.in-toto+json. PATH is read and its signature
    checked first, as by `kit report show`.
    """
    from kit.errors import BadInputError
    from kit.report.attest import attest
    from kit.report.files import ReadPolicy
    from kit.signing import signing_key as pick_key

    key = pick_key(signing_key)
    if key is None:
        raise BadInputError("no signing key", hint="create one with `kit keys generate`")
    _, trust = signers(None, keys_dir)
    policy = ReadPolicy(allow_untrusted=allow_untrusted, allow_unsigned=allow_unsigned)
    Path(out).write_bytes(attest(Path(path), key, trust, policy))
