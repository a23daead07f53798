"""The log page's verification column: each repository's chain is checked once, incrementally,
with the same code as `lonca audit verify` (lonca.audit), from the entries the worker serves."""
from dataclasses import dataclass, field

from lonca.audit import ChainVerifier
from lonca.canonical import canonical

PAGE = 1000


@dataclass
class RepoChain:
    verifier: ChainVerifier
    problem: str | None = None  # the first entry that did not verify, and why; nothing after it can
    problem_seq: int | None = None
    kinds: dict[int, str] = field(default_factory=dict)  # seq -> the signing key's kind, for signed entries


class LogVerification:
    def __init__(self):
        self._chains: dict[str, RepoChain] = {}

    async def catch_up(self, call, repo: str, until_seq: int) -> RepoChain:
        """Verify entries up to `until_seq`; `call(method, params)` reads the log."""
        chain = self._chains.setdefault(repo, RepoChain(ChainVerifier(repo)))
        v = chain.verifier
        while chain.problem is None and v.expected_seq < until_seq:
            entries = await call("log", {"from": v.expected_seq, "limit": PAGE})
            if not entries:
                break
            for e in entries:
                entry = e["entry"]
                if entry.get("human"):
                    chain.kinds[entry["seq"]] = (v.signer_key(entry) or {}).get("alg", "?")
                problem = v.check(canonical(entry).decode(), e["hash"], e["sig"])
                if problem:
                    chain.problem, chain.problem_seq = problem.reason, problem.seq
                    break
        return chain

    @staticmethod
    def status(chain: RepoChain, seq: int) -> tuple[str, str]:
        """(css class, words) for one entry."""
        if chain.problem_seq is not None and seq >= chain.problem_seq:
            return ("bad", f"does not verify: {chain.problem}") if seq == chain.problem_seq else ("bad", "after a broken entry")
        if seq >= chain.verifier.expected_seq:
            return ("wait", "not verified yet")
        kind = chain.kinds.get(seq)
        return ("ok", f"chain and daemon signature; {kind} signature verified" if kind else "chain and daemon signature verified")
