"""``kit report``: verify, show and compare report files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from kit.cli.options import examples, exit_by_verdict, fail_on_option
from kit.errors import EXIT_FAILED

_PUB_HELP = "Public key (.pub) the report must be signed with; without it the signature is "
_PUB_HELP += "checked against the trusted keys (`kit keys trust`)."
_UNTRUSTED_HELP = "Read a report signed by a key that is neither given nor trusted: its "
_UNTRUSTED_HELP += "signature is then not checked and the run is labelled UNTRUSTED."
_UNSIGNED_HELP = "Read an unsigned report: its signature is then not checked instead of failed."
_KEYS_HELP = "Folder of signers' public keys (every *.pub in it, e.g. examples/keys): each "
_KEYS_HELP += "report is checked against the one whose fingerprint its signature names, in place "
_KEYS_HELP += "of the trusted keys."


def _public_key(path: str | None) -> Any:
    from kit.signing import load_public_key

    return load_public_key(Path(path)) if path else None


def _trust(key: Any) -> Any:
    """The trust store, consulted only without --key."""
    from kit.signing import TrustStore

    return None if key is not None else TrustStore.default()


def _signers(key_path: str | None, keys_dir: str | None) -> tuple[Any, Any]:
    """(public key, trust store) for the readers: --key PUB, else --keys DIR (each report
    matched to its key by fingerprint), else kit's trust store."""
    if key_path and keys_dir:
        from kit.errors import BadInputError

        raise BadInputError(
            "--key and --keys both given",
            hint="--key PUB checks every report against one key; --keys DIR matches each "
            "report to the key in DIR whose fingerprint its signature names",
        )
    if keys_dir:
        from kit.report.table import keys_store

        return None, keys_store(Path(keys_dir))
    key = _public_key(key_path)
    return key, _trust(key)


def _keys(f: Any) -> Any:
    return click.option("--keys", "keys_dir", type=click.Path(file_okay=False), help=_KEYS_HELP)(f)


def _allow_untrusted(f: Any) -> Any:
    return click.option("--allow-untrusted", is_flag=True, help=_UNTRUSTED_HELP)(f)


def _allow_unsigned(f: Any) -> Any:
    return click.option("--allow-unsigned", is_flag=True, help=_UNSIGNED_HELP)(f)


@click.group(
    "report",
    epilog=examples(
        "kit report verify examples/reports/h200-tp1.report.json --keys examples/keys",
        "kit report show reports/cpu-tiny-*/report.json",
        "kit report compare reports/run-a/report.json reports/run-b/report.json",
    ),
)
def report() -> None:
    """Check, show and compare report files."""


@report.command(
    "verify",
    epilog=examples(
        "kit report verify reports/cpu-tiny-*/report.json --key ~/.config/kit/kit.pub",
        "kit report verify examples/reports/h200-tp1.report.json --keys examples/keys",
        "kit report verify report.json --allow-unsigned",
    ),
)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@_keys
@click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Check an unsigned report's content: its signature item is then not checked "
    "instead of failed.",
)
@_allow_untrusted
@click.option(
    "--threshold",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Signatures by distinct trusted keys (or keys in --keys) a co-signed report needs.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the checklist as JSON.")
def report_verify(
    path: str,
    key_path: str | None,
    keys_dir: str | None,
    allow_unsigned: bool,
    allow_untrusted: bool,
    threshold: int,
    as_json: bool,
) -> None:
    """Check a report file item by item, offline: envelope, signature, canonical payload,
    schema, recipe sha256, summaries recomputed from the raw records, record consistency,
    patch manifest, validity verdict. Without --key the signature is checked against the
    trusted keys (`kit keys trust`); a signature by any other key fails. After a failed
    signature nothing else is checked. Exit 1 when an item fails; 2 when the file cannot be
    read as a kit report at all.
    """
    from kit.report.verify import verify_report

    key, trust = _signers(key_path, keys_dir)
    if threshold > 1:
        if trust is None:
            from kit.errors import BadInputError

            raise BadInputError(
                f"--threshold {threshold} with --key: one key makes one signature",
                hint="pass --keys DIR with the co-signers' keys, or trust them (`kit keys trust`)",
            )
        trust = trust.model_copy(update={"threshold": threshold})
    checklist = verify_report(
        Path(path), key, allow_unsigned=allow_unsigned, allow_untrusted=allow_untrusted, trust=trust
    )
    if as_json:
        data = {"ok": checklist.ok, **checklist.model_dump(mode="json")}
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(checklist.render())
    if not checklist.ok:
        sys.exit(EXIT_FAILED)


@report.command(
    "show",
    epilog=examples(
        "kit report show reports/cpu-tiny-*/report.json",
        "kit report show --markdown --header examples/reports/*.json --keys examples/keys",
        "kit report show --allow-untrusted --allow-unsigned downloaded/report.json",
    ),
)
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--markdown", is_flag=True, help="One row per report of a Club-3090-style BENCHMARKS.md table."
)
@click.option("--header", is_flag=True, help="With --markdown: print the table header first.")
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@_keys
@_allow_unsigned
@_allow_untrusted
def report_show(
    paths: tuple[str, ...],
    markdown: bool,
    header: bool,
    key_path: str | None,
    keys_dir: str | None,
    allow_unsigned: bool,
    allow_untrusted: bool,
) -> None:
    """Show report files as a terminal table, or as Markdown table rows (rig, engine,
    model/quant, spec, narrative and code decode TPS, TTFT, notes). Every signature is checked
    first, as by `kit report verify`, before anything is printed: exit 1 on an invalid,
    untrusted or unsigned one unless allowed (then each line or row is labelled UNTRUSTED or
    UNSIGNED).
    """
    from kit.report.files import ReadPolicy, read_report
    from kit.report.show import markdown_header, markdown_row, show_table

    key, trust = _signers(key_path, keys_dir)
    policy = ReadPolicy(allow_unsigned=allow_unsigned, allow_untrusted=allow_untrusted)
    read = [read_report(Path(path), key, trust=trust, **policy) for path in paths]
    if markdown and header:
        click.echo(markdown_header())
    for i, (loaded, check) in enumerate(read):
        if markdown:
            click.echo(markdown_row(loaded, check))
        else:
            click.echo(("\n" if i else "") + show_table(loaded, check))


@report.command(
    "compare",
    epilog=examples(
        "kit report compare reports/run-a/report.json reports/run-b/report.json",
        "kit report compare reports/run-a/report.json \\\n"
        "  --reference recipes/club3090-qwen3.8-27b-2x3090-dflash2.yaml",
        "kit report compare run-a/report.json run-b/report.json --html compare.html",
    ),
)
@click.argument("a", type=click.Path(dir_okay=False))
@click.argument("b", type=click.Path(dir_okay=False), required=False)
@click.option(
    "--reference",
    "reference",
    type=click.Path(dir_okay=False),
    help="Compare A with the published figures in this recipe's reference section.",
)
@click.option(
    "--force", is_flag=True, help="Compare even when model, quantization or protocol differ."
)
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@_keys
@_allow_unsigned
@_allow_untrusted
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@fail_on_option
@click.option(
    "--html",
    "html_path",
    type=click.Path(dir_okay=False),
    help="Also write the two runs side by side, with each figure's noise band, as one page.",
)
def report_compare(
    a: str,
    b: str | None,
    reference: str | None,
    force: bool,
    key_path: str | None,
    keys_dir: str | None,
    allow_unsigned: bool,
    allow_untrusted: bool,
    as_json: bool,
    fail_on: str,
    html_path: str | None,
) -> None:
    """Deltas per metric (B - A) with noise bands, after checking that the runs are
    comparable: model, quantization or protocol differences refuse (exit 1) unless --force;
    hardware, engine, serving or patch differences are warnings. Both signatures are checked
    as by `kit report verify`: exit 1 on an invalid, untrusted or unsigned one unless allowed
    (then that side's every figure is labelled UNTRUSTED or UNSIGNED).
    With B, the exit code follows the verdict on B as a re-run of A: 0 REPRODUCED, 1 NOT
    COMPARABLE, 4 DIFFERENT (see --fail-on), 5 INCONCLUSIVE. With --reference RECIPE whose
    reference has load points (`kit import`), A's points are judged label by label against
    them, and the exit code follows that verdict the same way.
    """
    from kit.errors import BadInputError
    from kit.report.compare import compare_reports
    from kit.report.files import ReadPolicy, read_report
    from kit.report.reference import compare_with_reference

    if (b is None) == (reference is None):
        raise BadInputError(
            "compare needs a second report B or --reference RECIPE, not both or neither",
            hint="kit report compare A B, or kit report compare A --reference RECIPE",
        )
    from kit.report.show import comparison_text, side_labels

    key, trust = _signers(key_path, keys_dir)
    policy = ReadPolicy(allow_unsigned=allow_unsigned, allow_untrusted=allow_untrusted)
    first, check_a = read_report(Path(a), key, trust=trust, **policy)
    if b is not None:
        second, check_b = read_report(Path(b), key, trust=trust, **policy)
        result = compare_reports(first, second, force=force)
        sides: list[Any] = [(first, check_a), (second, check_b)]
    else:  # the run is B, the reference A
        result = compare_with_reference(first, str(reference), force=force)
        sides = [None, (first, check_a)]
    labels = side_labels([s[1] if s is not None else None for s in sides])
    if html_path:
        from kit.report.html.compare import write_compare_page

        write_compare_page(result, sides, Path(html_path))
    if as_json:
        named = {s.lower(): f"{label} {getattr(result, s.lower())}" for s, label in labels.items()}
        click.echo(result.model_copy(update=named).model_dump_json(indent=2))
    else:
        click.echo(comparison_text(result, labels))
    if result.verdict is not None:
        exit_by_verdict(result.verdict, fail_on)
    elif result.points is not None:
        exit_by_verdict(result.points, fail_on)


@report.command(
    "html",
    epilog=examples(
        "kit report html reports/cpu-tiny-*/report.json",
        "kit report html report.json -o /tmp/run.html --key ~/.config/kit/kit.pub",
        "kit report html --allow-untrusted downloaded/report.json",
    ),
)
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "-o",
    "--output",
    "output",
    type=click.Path(dir_okay=False),
    help="HTML file to write (default: beside the report, named after it: NAME.json -> "
    "NAME.html, NAME.report.json -> NAME.report.html).",
)
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=_PUB_HELP)
@_keys
@_allow_unsigned
@_allow_untrusted
def report_html(
    path: str,
    output: str | None,
    key_path: str | None,
    keys_dir: str | None,
    allow_unsigned: bool,
    allow_untrusted: bool,
) -> None:
    """Write one self-contained HTML page for a report: verdict, rig, decode and TTFT per run,
    prefill probe, spec-decode acceptance, GPU timeline, load sweep, provenance. It opens
    offline (charts are inline SVG, no scripts, no requests) and states the signature check at
    render time. The signature is checked as by `kit report verify`: exit 1 on an invalid,
    untrusted or unsigned one unless allowed. Needs matplotlib: pip install 'kit[html]'.
    """
    from kit.report.files import ReadPolicy, read_report
    from kit.report.html import html_path, write_html

    key, trust = _signers(key_path, keys_dir)
    policy = ReadPolicy(allow_unsigned=allow_unsigned, allow_untrusted=allow_untrusted)
    loaded, check = read_report(Path(path), key, trust=trust, **policy)
    out = Path(output) if output else html_path(Path(path))
    click.echo(str(write_html(loaded, check, out)))


@report.command(
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


@report.command("attest", epilog=examples("kit report attest report.json -o report.intoto.json"))
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("-o", "--out", required=True, type=click.Path(dir_okay=False), help="File to write.")
@click.option(
    "--signing-key",
    type=click.Path(dir_okay=False),
    default=None,
    help="Private key to sign with (default: $KIT_SIGNING_KEY, else kit's key).",
)
@_keys
@_allow_untrusted
@_allow_unsigned
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
    _, trust = _signers(None, keys_dir)
    policy = ReadPolicy(allow_untrusted=allow_untrusted, allow_unsigned=allow_unsigned)
    Path(out).write_bytes(attest(Path(path), key, trust, policy))
