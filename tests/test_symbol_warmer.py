"""The worker warms the base a proposal was made against, off the request path, and the facts
of the next proposal on that base, answered through the warm index, are the same."""
from __future__ import annotations

import time

from helpers import b64


def preview(env, token: str, files: dict[str, str]) -> dict:
    changes = [{"path": p, "content_b64": b64(t), "mode": None} for p, t in files.items()]
    return env.client.call("facts.preview", {"base": env.trunk, "files": changes},
                           token=token)["facts"]


def test_a_base_is_warmed_after_a_proposal_and_facts_stay_the_same(repo_env) -> None:
    agent = repo_env.agent()
    resigned = {"app.py": "def charge(amount, currency):\n    return amount * 2\n\n\n"
                          "class Client:\n    def pay(self):\n        return charge(1)\n"}
    first = preview(repo_env, agent["token"], resigned)
    assert first["signature_changes"] == ["app.py#charge"]
    assert first["affected"] == ["app.py#Client.pay"]
    deadline = time.monotonic() + 30
    while "warmed base" not in repo_env.w.output.read_text(errors="replace"):
        assert time.monotonic() < deadline, "the worker did not warm the base"
        time.sleep(0.05)
    assert preview(repo_env, agent["token"], resigned) == first
    renamed = {"lib/util.py": "def helper2():\n    return 42\n",
               "app.py": "def charge(amount):\n    return helper() * amount\n\n\n"
                         "class Client:\n    def pay(self):\n        return charge(1)\n"}
    facts = preview(repo_env, agent["token"], renamed)
    assert facts["deletes"] == ["lib/util.py#helper"] and facts["affected"] == []
