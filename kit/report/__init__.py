"""Reports: one signed JSON document per run.

- :mod:`~kit.report.schema`: the model, its version and JSON Schema;
- :mod:`~kit.report.assemble`: building one, for every runtime (and after a failure);
- :mod:`~kit.report.validity`: the verdict (is the run fit to quote);
- :mod:`~kit.report.files`: the only writer and reader of report files;
- :mod:`~kit.report.show`, :mod:`~kit.report.describe`: reports for people;
- :mod:`~kit.report.compare`, :mod:`~kit.report.comparability`, :mod:`~kit.report.reference`,
  :mod:`~kit.report.points` (a published reference's load points, label by label);
- :mod:`~kit.report.verify`: the checklist for a stranger's report.
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
