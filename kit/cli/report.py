"""``kit report``: verify, show and compare report files."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from kit.cli.options import examples, exit_by_verdict, fail_on_option
from kit.cli.signers import (
    PUB_HELP,
    allow_unsigned_option,
    allow_untrusted_option,
    keys_option,
    signers,
)
from kit.errors import EXIT_FAILED


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
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=PUB_HELP)
@keys_option
@click.option(
    "--allow-unsigned",
    is_flag=True,
    help="Check an unsigned report's content: its signature item is then not checked "
    "instead of failed.",
)
@allow_untrusted_option
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

    key, trust = signers(key_path, keys_dir)
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
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=PUB_HELP)
@keys_option
@allow_unsigned_option
@allow_untrusted_option
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

    key, trust = signers(key_path, keys_dir)
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
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=PUB_HELP)
@keys_option
@allow_unsigned_option
@allow_untrusted_option
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
    COMPARABLE, 4 DIFFERENT (see --fail-on), 5 INCONCLUSIVE. With --reference RECIPE, every
    figure the reference states is a row (judged, not measured, or not comparable) and the exit
    code follows the verdict on A against them; where the reference has load points (`kit
    import`), A's points are judged label by label too, and a failing points verdict exits the
    same way.
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

    key, trust = signers(key_path, keys_dir)
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
        data = comparison_json(result, sides, labels)
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        click.echo(comparison_text(result, labels))
    # against a reference: its figures' verdict, then its load points'; the first that fails
    for verdict in (result.verdict, result.points):
        if verdict is not None:
            exit_by_verdict(verdict, fail_on)


def comparison_json(result: Any, sides: list[Any], labels: dict[str, str]) -> dict[str, Any]:
    """`kit report compare --json`: the comparison (each labelled side's run named after its
    label), then ``trust``: each side's signature and trust (None: a recipe's reference) and
    whether both were verified, so that a script that reads ``verdict.verdict`` can tell."""
    from kit.report.show.trust import side_trust

    named = {s.lower(): f"{label} {getattr(result, s.lower())}" for s, label in labels.items()}
    data: dict[str, Any] = json.loads(result.model_copy(update=named).model_dump_json())
    trust = {
        side: side_trust(s[1]).model_dump(mode="json") if s is not None else None
        for side, s in zip(("a", "b"), sides, strict=True)
    }
    data["trust"] = {
        **trust,
        "verified": all(t is None or t["trusted"] for t in trust.values()),
    }
    return data


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
@click.option("--key", "key_path", type=click.Path(dir_okay=False), help=PUB_HELP)
@keys_option
@allow_unsigned_option
@allow_untrusted_option
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

    key, trust = signers(key_path, keys_dir)
    policy = ReadPolicy(allow_unsigned=allow_unsigned, allow_untrusted=allow_untrusted)
    loaded, check = read_report(Path(path), key, trust=trust, **policy)
    out = Path(output) if output else html_path(Path(path))
    click.echo(str(write_html(loaded, check, out)))
