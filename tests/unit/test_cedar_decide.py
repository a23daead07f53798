"""What policy.cedar answers (service/cedar_policy.decide) for a deny, a forbid or a permit that
fails to evaluate, and no permit; and the actions it allows without evaluating (_open_actions),
checked as an oracle against cedarpy's own evaluation, for each kind of principal, over paths a
forbid names and paths it does not."""
from dataclasses import replace

import cedarpy
import pytest

from lonca.service import cedar_policy as cp
from lonca.service.policy import DEFAULT
from lonca.service.state import RepoState, SessionRec

HUMAN = {"uid": {"type": "Lonca::Human", "id": "bob"}, "parents": [],
         "attrs": {"name": "bob", "person": "bob", "key": "ed25519", "presence": False}}
SESSION = {"uid": {"type": "Lonca::Session", "id": "s-1"}, "parents": [],
           "attrs": {"agent": "intern", "model": "m", "harness": "", "level": "unobserved", "tainted": False}}
POLICIES = [
    "permit(principal, action, resource);",
    'permit(principal, action, resource);\nforbid(principal, action == Lonca::Action::"approve", resource is Lonca::Path)\n'
    'when { resource.path like "pay/*" };',
    'permit(principal, action, resource);\nforbid(principal is Lonca::Session, action in [Lonca::Action::"lease.acquire", '
    'Lonca::Action::"change.propose"], resource);',
    "permit(principal, action, resource);\nforbid(principal, action, resource is Lonca::Repo);",
    'permit(principal, action, resource) when { context.repo == "demo" };\nforbid(principal, action == Lonca::Action::"freeze", resource);',
    'permit(principal is Lonca::Human, action, resource);',
]


@pytest.mark.parametrize("text", POLICIES)
def test_open_actions_are_allowed_on_every_request(text):
    cedar = cp.parse(text)
    for action in cp.HUMAN_ACTIONS + cp.PATH_ACTIONS:
        allowed_everywhere = True
        for principal in (HUMAN, SESSION):
            for resource in ({"type": "Lonca::Path", "id": "pay/a.py"}, {"type": "Lonca::Path", "id": "src/a.py"},
                             {"type": "Lonca::Repo", "id": "other"}):
                entities = [principal, {"uid": resource, "parents": [], "attrs": {"path": resource["id"]} if
                                        resource["type"] == "Lonca::Path" else {"name": resource["id"]}}]
                req = {"principal": principal["uid"], "action": {"type": "Lonca::Action", "id": action}, "resource": resource,
                       "context": {"repo": "other", "change": "", "kind": "edit", "symbol": ""}}
                allowed_everywhere &= cedarpy.is_authorized(req, cedar.policies, entities).allowed
        if action in cedar.open_actions:
            assert allowed_everywhere, (text, action)
    every = set(cp.HUMAN_ACTIONS + cp.PATH_ACTIONS)
    expected = [every, every - {"approve"}, every - {"lease.acquire", "change.propose"}, set(), set(), set()]
    assert set(cedar.open_actions) == expected[POLICIES.index(text)]


def repo_state(cedar_text: str) -> RepoState:
    rs = RepoState(name="demo", daemon_key="k", trunk="t", policy_id="p", profile="cooperative",
                   policy=replace(DEFAULT, cedar=cp.load(cedar_text)))
    rs.sessions["s-1"] = SessionRec(id="s-1", agent="intern", model=None, task=None, scope={}, created_ms=0, expires_ms=1)
    return rs


@pytest.mark.parametrize("text, reasons", [
    ("permit(principal, action, resource);", []),
    ('@id("p") permit(principal, action, resource) when { 9223372036854775807 + 1 > 0 };', ["policy_no_permit"]),
    ('permit(principal, action, resource);\n@id("f") forbid(principal, action, resource) when { 9223372036854775807 + 1 > 0 };',
     ["policy_error:f"]),
    ('@id("f") forbid(principal, action, resource) when { 9223372036854775807 + 1 > 0 };', ["policy_error:f", "policy_no_permit"]),
    ('permit(principal, action, resource);\n@id("f") forbid(principal, action, resource);', ["policy_forbid:f"]),
    ("// nothing but a comment", []),
])
def test_what_decide_answers(text, reasons):
    rs = repo_state(text)
    assert cp.decide(rs, cp.session_entity(rs, "s-1"), "change.propose", ["a.py", "b.py"]) == reasons


SHORTCUT_POLICIES = POLICIES + [
    'permit(principal, action, resource);\n@id("presence") forbid(principal is Lonca::Human, action == Lonca::Action::"approve", '
    'resource is Lonca::Path) unless { principal.presence };',
    'permit(principal, action, resource);\n@id("one") forbid(principal, action, resource == Lonca::Path::"pay/a.py");',
    'permit(principal, action, resource);\n@id("ctx") forbid(principal, action, resource) when { context.change == "c1" };',
    'permit(principal, action, resource) unless { resource is Lonca::Path && resource.path like "pay/*" };',
    '@id("only-alice") permit(principal is Lonca::Human, action, resource is Lonca::Path) when { principal.person == "alice" };',
]


@pytest.mark.parametrize("text", SHORTCUT_POLICIES)
def test_the_shortcuts_answer_as_a_request_a_path_does(text):
    """open_actions and path_free change the cost, never the answer: decide with them equals
    decide asking every path (both left empty)."""
    rs = repo_state(text)
    whole = replace(rs.policy.cedar, open_actions=frozenset(), path_free=frozenset())
    full = replace(rs, policy=replace(rs.policy, cedar=whole))
    rs.humans["bob"] = {"alg": "webauthn-es256", "public": "00"}
    full.humans = rs.humans
    for principal in (cp.human_entity(rs, "bob"), cp.session_entity(rs, "s-1")):
        for action in cp.HUMAN_ACTIONS + cp.PATH_ACTIONS:
            for paths in ([], ["src/a.py"], ["a.py", "pay/a.py"], ["src/a.py", "pay/a.py", "pay/b.py"]):
                for change in ("", "c1"):
                    assert cp.decide(rs, principal, action, paths, change=change) == \
                        cp.decide(full, principal, action, paths, change=change), (action, paths, change)
