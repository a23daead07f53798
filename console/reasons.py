"""A decision's reason codes in words, for the reviewer who must act on them (seed 001, "Reason
codes"). The code stays beside the words: a code this table does not know shows as it came, as
the seed asks of a client ("denied for a reason it can show but not interpret")."""

# code (the part before the first ':') -> the sentence, with {0}, {1} … the parts after it
WORDS = {
    "review_required": "the policy has a human review every agent change ([review] agent_changes = \"human\")",
    "critical_path": "it changes {0}, a critical path of the policy ([review] critical_paths)",
    "unobserved_write": "{0} was written where no hook saw it (a shell command, or outside the harness)",
    "tainted_session": "the agent's session is tainted (it read outside its workspace, or its sandbox was left)",
    "tainted_critical_path": "a tainted session changes a critical path",
    "unhooked_session": "the harness did not run the session's hooks, so nothing it did was observed",
    "unhooked_critical_path": "a session whose hooks did not run changes a critical path",
    "unread_file": "no grammar can read {0} after this change: its symbols could not be checked",
    "signature_change": "it changes the signature of {0}",
    "affected_lease": "session {0} holds lease set {1} on symbols that use what this change alters",
    "replaces": "it replaces change {0} of the same workspace, which waited for a human",
    "lease_missing": "no lease on {0}",
    "verification_failed": "the check {0} failed",
    "verification_error": "the check {0} could not run to its end",
    "verification_missing": "the check {0} is owed but the policy gives no command for it",
    "verification_quota": "past the verification quota of the {0}",
    "merge_conflict": "it no longer merges with trunk",
    "conflict": "it conflicts with trunk on {0}",
    "stale_trunk": "it was proposed on a trunk that has moved",
    "frozen": "the repository is frozen: {0}",
    "policy_forbid": "policy.cedar forbids it: the policy {0}",
    "policy_no_permit": "no permit of policy.cedar applies to it (Cedar denies what no permit allows)",
    "policy_error": "the policy {0} of policy.cedar could not be evaluated, so it counts as forbidding it",
    "policy_unreadable": "policy.cedar does not parse: what it decides is denied until a human sends one that does",
    "same_human": "{0} approved already, and this name counts as the same human (names a human enrolled are "
                  "theirs unless [review] distinct_humans lists them)",
}


def in_words(reason: str) -> str:
    if reason.startswith("rejected: "):
        return f"a human rejected it: {reason[len('rejected: '):]}"
    code, *parts = reason.split(":")
    words = WORDS.get(code)
    if words is None:
        return reason
    if code == "affected_lease" and len(parts) == 2:
        return words.format(*parts)
    return words.format(":".join(parts)) if parts else words.replace(" {0}", "")
