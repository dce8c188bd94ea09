"""The trust boundary: every file rlrun reads is data, and nothing it writes leaves the log root.

rlrun trusts the installed packages and the person at the keyboard (the command line, the Python request). It
does not trust any file: a checkpoint, a configuration, a spec, a study, a results file or a run folder may come
from someone else. Reading one never imports, evaluates or unpickles anything that names code; a name that
selects code (a class, a scheduler, an activation, a model expression) is looked up in a table rlrun owns;
paths resolve inside their run folder and log root; sizes, nesting and aliases are bounded; what is printed or
written into a report is escaped. docs/security.md is the threat model.

This package is the one place that rule is enforced; it imports nothing of rlrun outside it but `rlrun.errors`.
"""
