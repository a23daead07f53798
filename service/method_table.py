"""The worker's whole method table, in one place: the modules that define methods (each adds its
own with `@method`, beside the method's code) are listed here, and importing this module is what
makes the table complete. The daemon and the tests read `METHODS` from here; replay does not need
any of them (service/reducers.py)."""
from . import (backup_methods, bridge_methods, change_methods, event_methods, hook_input, hook_methods, human_change_methods, human_methods,
               key_methods, lease_methods, read_methods, redact_methods, review_methods, running_checks, security_methods, session_methods, symbol_methods,
               trunk_methods)
from .human_methods import SUBMIT_OPS
from .methods import METHODS

MODULES = (backup_methods, bridge_methods, change_methods, event_methods, hook_input, hook_methods, human_change_methods, human_methods,
           key_methods, lease_methods, read_methods, redact_methods, review_methods, running_checks, security_methods, session_methods, symbol_methods,
           trunk_methods)

__all__ = ["METHODS", "MODULES", "SUBMIT_OPS"]
