"""The policy (issue 16): docs/policy.md equals the code, parsing is strict with errors naming the
key, a bad lonca.toml is refused before it is stored, and one an import brings leaves the worker
running on the defaults."""
import re
import tomllib

import pytest

from conftest import ROOT, git
from helpers import RepoEnv, acquire
from lonca.protocol import LoncaError
from lonca.service.policy import DEFAULT, HARNESS_SETTINGS, SETTINGS, Policy, PolicyError, load, parse

DOC = (ROOT / "docs" / "policy.md").read_text()


# --- docs/policy.md equals the code -----------------------------------------------------------

def documented_rows() -> dict[str, tuple[str, object]]:
    """`[table] key` -> (type, default) from the table of docs/policy.md."""
    rows = re.findall(r"^\| `(\[[a-z]+(?:\.<name>)?\] [a-z_]+)` \| (.+?) \| (.+?) \|$", DOC, re.M)
    assert rows, "docs/policy.md has no table of keys"
    out = {}
    for key, type_text, default in rows:
        value = None if default == "none" else tomllib.loads(f"v = {default.strip('`')}")["v"]
        out[key] = (type_text, value)
    assert len(out) == len(rows), "a key is documented twice"
    return out


def test_every_key_type_and_default_is_documented_and_nothing_else():
    # a harness's key has no default of its own: left out, [sessions] says
    assert documented_rows() == {s.name: (s.type_text, s.default()) for s in SETTINGS} | {
        s.name: (s.type_text, None) for s in HARNESS_SETTINGS}


def example() -> dict:
    block = DOC.split("```toml\n", 1)[1].split("```", 1)[0]
    return tomllib.loads(block)


def test_the_example_has_every_key_and_parses():
    doc = example()
    harnesses = doc.pop("harnesses")
    assert {f"[{t}] {k}" for t, keys in doc.items() for k in keys} == {s.name for s in SETTINGS}
    assert {f"[harnesses.<name>] {k}" for keys in harnesses.values() for k in keys} == {s.name for s in HARNESS_SETTINGS}
    parse(DOC.split("```toml\n", 1)[1].split("```", 1)[0])


def test_the_example_shows_the_defaults_but_for_the_examples_of_checks():
    doc = example()
    for s in SETTINGS:
        shown = doc[s.table][s.key]
        if s.default() in (None, {}):      # build, tests, extended, checks, checks_by_path
            assert shown, s.name
        else:
            assert shown == s.default(), s.name


def test_every_field_of_the_policy_has_one_key():
    # harnesses: HARNESS_SETTINGS by name; cedar: policy.cedar, not a key of lonca.toml
    fields = set(Policy.__dataclass_fields__) - {"problem", "harnesses", "cedar"}
    assert sorted(s.field for s in SETTINGS) == sorted(fields)


# --- strict parsing ---------------------------------------------------------------------------

@pytest.mark.parametrize("text, message", [
    ('[leases]\nshared = "false"\n', '[leases] shared must be true or false, got "false"'),
    ("[verification]\nbatch_size = 2.9\n", "[verification] batch_size must be an integer, got 2.9"),
    ("[verification]\nbatch_size = true\n", "[verification] batch_size must be an integer, got true"),
    ("[verification]\nbatch_size = 0\n", "[verification] batch_size must be an integer from 1 to "),
    ('[verification]\ntests = "make test"\n',
     '[verification] tests must be a non-empty array of strings (argv'),
    ("[verification]\ntests = []\n", "[verification] tests must be a non-empty array"),
    ('[verification]\ntests = ["make", 1]\n', '[verification] tests must be a non-empty array'),
    ("[leases]\nmax_ttl_minutes = 9007199254740991\n", "[leases] max_ttl_minutes must be an integer"),
    ('[leases]\nunparsed_files = "lax"\n',
     '[leases] unparsed_files must be "optimistic" or "strict", got "lax"'),
    ('[review]\ncritical_paths = "lonca.toml"\n', "[review] critical_paths must be an array of strings"),
    ('[verification]\nenv = ["A=B"]\n', "[verification] env must be an array of environment variable"),
    ('[verification]\nchecks = { lint = "ruff" }\n', '[verification] checks.lint must be a non-empty'),
    ('[verification]\nchecks = { build = ["make"] }\n', '[verification] checks: "build" can not name'),
    ('[verification]\nchecks_by_path = { "src/**" = ["lint"] }\n',
     '[verification] checks_by_path: "lint" is not a check of [verification] checks'),
    ("[leases]\nshred = true\n", "[leases] shred is not a setting Lonca knows; [leases] has max_ttl"),
    ("[lease]\nshared = true\n", "[lease] shared is not a setting Lonca knows: there is no table"),
    ("[lease]\n", "[lease] is not a setting Lonca knows: there is no table [lease]; the tables"),
    ("shared = true\n", "shared is not a table; settings go in [leases]"),
    ("[leases\n", "lonca.toml does not parse"),
    ("a = " + "[" * 5000 + "]" * 5000 + "\n", "nested too deep"),
    ("# " + "x" * (1 << 20) + "\n", "is over 1048576 bytes"),
    ('[review]\ncritical_paths = ["\ud800"]\n', "not UTF-8 text: a lone surrogate at offset 28"),
    ('[sessions]\nrequired_level = "watched"\n',
     '[sessions] required_level must be "unobserved" or "hooks" or "hooks_sandbox" or "isolated", got "watched"'),
    ('[harnesses.codex]\nrequired_level = "hook"\n',
     '[harnesses.codex] required_level must be "unobserved" or "hooks" or "hooks_sandbox" or "isolated", got "hook"'),
    ("[harnesses.codex]\nrequired_levels = 1\n",
     "[harnesses.codex] required_levels is not a setting Lonca knows; [harnesses.<name>] has required_level"),
    ('[harnesses]\nrequired_level = "hooks"\n', "[harnesses] required_level is not a harness's table"),
    ('[harnesses."Claude Code"]\nrequired_level = "hooks"\n', '[harnesses."Claude Code"]: a harness is named'),
    ('[harnesses.acme]\nevent = { Pre = "before_tool" }\n', "[harnesses.acme] event is not a setting Lonca knows"),
    ('[harnesses.acme]\nwrite_tools = { edit = "path" }\n', "[harnesses.acme] events is missing: Lonca has no profile"),
    ('[harnesses.acme]\nevents = { Pre = "before" }\n', '[harnesses.acme] events."Pre" must be a table of'),
    ('[harnesses.acme]\nevents = { Pre = "before_tool" }\nwrite_tools = { edit = 1 }\n',
     '[harnesses.acme] write_tools."edit" must be a table of tool name = the key'),
    ('[harnesses.acme]\nevents = { Pre = "before_tool" }\nbefore_tool_mcp = true\n',
     "[harnesses.acme] tool_prefix is missing: with before_tool_mcp = true"),
    ('[harnesses.codex]\ntool_context = "no"\n', '[harnesses.codex] tool_context must be true or false, got "no"'),
])
def test_a_value_that_does_not_fit_is_refused_naming_the_key(text, message):
    with pytest.raises(PolicyError) as e:
        parse(text)
    assert message in str(e.value)
    assert load(text).problem == str(e.value) and load(text).check_names is None


def test_values_that_fit_are_kept_as_written():
    pol = parse('[leases]\nshared = true\nmax_ttl_minutes = 5\n[verification]\nbatch_size = 2\n'
                'tests = ["make", "test"]\nchecks = { lint = ["ruff", "check"] }\n'
                'checks_by_path = { "src/**" = ["lint"] }\nenv = ["HOME"]\n')
    assert (pol.shared, pol.max_ttl_ms, pol.batch_size, pol.tests) == (True, 300_000, 2,
                                                                       ("make", "test"))
    assert pol.checks == {"lint": ("ruff", "check")} and pol.check_env == ("HOME",)
    assert parse("") == DEFAULT and load(None) == DEFAULT
    pol = parse('[sessions]\nrequired_level = "hooks"\n[harnesses.gemini]\nrequired_level = "unobserved"\n')
    assert pol.harnesses == {"gemini": {"required_level": "unobserved"}}
    assert (pol.level_required("gemini"), pol.level_required("claude-code"), pol.level_required(None)) == (
        "unobserved", "hooks", "hooks")


def test_a_harness_profile_is_the_built_in_one_under_the_policy_keys_or_the_policy_own():
    pol = parse('[harnesses.gemini]\nsetup = { a = [1, { b = "{hole}" }] }\n'
                '[harnesses.acme]\nevents = { Pre = "before_tool" }\nwrite_tools = { edit = "path" }\n'
                '[harnesses.zeta]\nrequired_level = "hooks"\n')
    gemini = pol.profile("gemini")
    assert gemini["events"]["BeforeTool"] == "before_tool" and gemini["setup"] == {"a": [1, {"b": "{hole}"}]}
    assert pol.profile("acme") == {"events": {"Pre": "before_tool"}, "tool_prefix": "", "before_tool_mcp": False,
                                   "tool_context": False, "write_tools": {"edit": "path"}, "read_tools": {},
                                   "setup": None}
    # a level of its own makes no profile; a harness nobody names has none
    assert pol.profile("zeta") is None and pol.profile("vim") is None and pol.profile(None) is None
    assert DEFAULT.profile("codex")["write_tools"] == {"apply_patch": "command"}


# --- over the socket --------------------------------------------------------------------------

@pytest.fixture(params=["sqlite"])
def database_url(request):
    return None       # the policy is read from git, not the store


def test_a_bad_policy_is_invalid_and_never_stored(repo_env):
    env = repo_env
    before = env.status()
    entries = len(env.log())
    with pytest.raises(LoncaError) as e:
        env.policy('[verification]\nbatch_size = 2.9\n')
    assert e.value.code == "invalid"
    assert "[verification] batch_size must be an integer, got 2.9" in str(e.value)
    with pytest.raises(LoncaError) as e:
        env.policy('[verification]\ntests = "make test"\n')
    assert e.value.code == "invalid" and "[verification] tests must be" in str(e.value)
    after = env.status()
    assert (after["policy"], after["policy_problem"]) == (before["policy"], None)
    assert len(env.log()) == entries
    # a good one goes through and holds
    env.policy('[leases]\nshared = true\n')
    assert env.status()["policy"] != before["policy"]


@pytest.fixture
def bad_import(worker, source_repo, monkeypatch):
    """A repository imported with a lonca.toml that does not fit (`shared = "false"`, which the
    old parser read as true)."""
    (source_repo / "lonca.toml").write_text('[leases]\nshared = "false"\n')
    git("add", ".", cwd=source_repo)
    git("commit", "-qm", "policy", cwd=source_repo)
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    env = RepoEnv(worker, source_repo)
    yield env
    env.client.close()


MESSAGE = 'lonca.toml: [leases] shared must be true or false, got "false"'


def test_an_imported_bad_policy_leaves_the_defaults_and_says_why(bad_import, worker):
    env = bad_import
    st = env.status()
    assert st["policy_problem"] == MESSAGE and st["policy_checks"] is None
    agent = env.agent("a")["token"]
    res = acquire(env.client, agent, {"symbol": "app.py#charge", "kind": "shared"})
    assert res["decision"]["outcome"] == "deny"        # the default holds: shared is off
    doctor = worker.cli_json("doctor")
    policy = [c for c in doctor["checks"] if c["name"] == "policy demo"]
    assert policy and policy[0]["level"] == "warn" and policy[0]["detail"] == MESSAGE
    # the trunk commit holds that file: naming it in policy.update is refused the same way
    with pytest.raises(LoncaError) as e:
        env.submit({"op": "policy.update", "policy": st["trunk"]})
    assert e.value.code == "invalid" and MESSAGE in str(e.value)
    # the worker replays it at start and goes on; a human corrects it
    worker.stop()
    worker.start()
    env.client = worker.client().connect()
    assert env.status()["policy_problem"] == MESSAGE
    env.policy("[leases]\nshared = false\n")
    st = env.status()
    assert st["policy_problem"] is None and st["policy_checks"] == []


def test_prepare_init_warns_of_an_imported_bad_policy(worker, source_repo, monkeypatch):
    (source_repo / "lonca.toml").write_text("[verification]\nbatch_size = 2.9\n")
    git("add", ".", cwd=source_repo)
    git("commit", "-qm", "policy", cwd=source_repo)
    monkeypatch.setenv("LONCA_HUMANS", worker.env["LONCA_HUMANS"])
    from helpers import human_key
    key = human_key("alice")
    c = worker.client().connect()
    prepared = c.call("repo.prepare_init", {"repo": "demo", "human": key.name,
                                            "human_key": key.public,
                                            "import_from": str(source_repo)})
    assert any(w.startswith("lonca.toml: [verification] batch_size must be an integer, got 2.9")
               and "policy.update" in w for w in prepared["warnings"]), prepared["warnings"]
