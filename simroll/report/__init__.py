"""Browsable run reports: one static ``report.html`` per eval or certification run.

``runs`` reads a run directory and says what is missing or broken, ``compare`` pairs two eval
runs on shared episodes, ``figures`` draws the plots. One module per page turns a run into
template data (``eval_page``, ``certify_page``, ``compare_page``), ``render`` is the renderer they
share (the Jinja2 templates in ``templates/``, escaping, number formats, inline figures) and
``html`` holds the entry points that pick the page and write it atomically. The command is
``simroll report <run_dir> [<run_dir_b>]``; ``simroll eval`` and ``simroll certify`` write the
page at the end of a run.
"""

from simroll.report.html import (
    REPORT_FILENAME,
    write_comparison_report,
    write_html_report,
    write_html_report_or_warn,
)
from simroll.report.runs import ReportError

__all__ = [
    "REPORT_FILENAME",
    "ReportError",
    "write_comparison_report",
    "write_html_report",
    "write_html_report_or_warn",
]
