"""Reports: one signed JSON document per run, its model in :mod:`~kit.report.schema`, read and
written only through :mod:`~kit.report.files`.
"""

from kit.report.files import read_report, write_report
from kit.report.schema import SCHEMA_VERSION, Report, ServerInfo, report_json_schema
from kit.report.show import summary_table

__all__ = [
    "SCHEMA_VERSION",
    "Report",
    "ServerInfo",
    "read_report",
    "report_json_schema",
    "summary_table",
    "write_report",
]
