"""The edge of the worker (issue 16): strict I-JSON lines (service/wire_json.py), one schema per
method beside the method table (service/schemas.py), and each class of bad input the fuzzing
found, sent to a real worker: `invalid`, the connection goes on, nothing logged, no traceback."""
import json
import re

import pytest
from hypothesis import given, settings, strategies as st

from helpers import b64
from lonca.service import daemon  # noqa: F401  (loads every method module)
from lonca.service import human_methods, schemas, wire_json
from lonca.service.methods import METHODS
from test_credentials import documented
from test_wire import connect, read_line

TOKEN = "lonca_" + "5a" * 32


@pytest.fixture(params=["sqlite"])
def database_url(request):
    # The edge is before the store; one backend is enough here.
    return None


# -- strict decoding -----------------------------------------------------------------------------

@pytest.mark.parametrize("line, says", [
    (b'\xef\xbb\xbf{"id": 1, "method": "ping", "params": {}}', "byte order mark"),
    ('{"id": 1, "method": "ping", "params": {}}'.encode("utf-16"), "UTF-16"),
    ('{"id": 1, "method": "ping", "params": {}}'.encode("utf-32-le"), "UTF-16"),
    (b'{"id": 1, "method": "ping", "params": {"a": "\xff"}}', "UTF-8"),
    (b'{"id": 1, "method": "ping", "params": {"a": "\xed\xa0\x80"}}', "UTF-8"),
    (b'{"id": 1, "method": "ping", "params": {"a": NaN}}', "integers"),
    (b'{"id": 1, "method": "ping", "params": {"a": -Infinity}}', "integers"),
    (b'{"id": 1, "method": "ping", "params": {"a": 1.0}}', "integers"),
    (b'{"id": 1, "method": "ping", "params": {"a": 9007199254740992}}', "9007199254740991"),
    (b'{"id": 1, "method": "ping", "params": {"a": -9007199254740992}}', "9007199254740991"),
    (b'{"id": 1, "method": "ping", "params": {"a": 1, "a": 1}}', "same key twice"),
    (b'{"id": 1, "id": 2, "method": "ping", "params": {}}', "same key twice"),
    (b'[' * 100_000 + b']' * 100_000, "nests deeper"),
])
def test_lines_strict_json_refuses(line, says):
    with pytest.raises(wire_json.Refused) as e:
        wire_json.decode_request(line)
    assert says in e.value.message and e.value.rid == 0


@pytest.mark.parametrize("params, says", [
    ({"a": "\ud800"}, "lone surrogate"),
    ({"\udfff": 1}, "lone surrogate"),
    ({"a": [[[[{"b": "x\udc00"}]]]]}, "lone surrogate"),
    ({"set": TOKEN}, "token"),
    ({"note": "mine is lonca_h_" + "0" * 20 + " ok"}, "token"),
    ({TOKEN: 1}, "token"),
    ({"a": json.loads("[" * 65 + "]" * 65)}, "nests deeper"),
])
def test_params_refused_with_the_requests_id(params, says):
    line = json.dumps({"id": "r-1", "method": "ping", "params": params}).encode()  # ensure_ascii: \\ud800 escapes
    with pytest.raises(wire_json.Refused) as e:
        wire_json.decode_request(line)
    assert says in e.value.message and e.value.rid == "r-1"
    assert TOKEN not in e.value.message and "lonca_h_" not in e.value.message


@pytest.mark.parametrize("params, says", [
    ({"set": TOKEN}, "token"),
    ({"note": "lonca_" + "0" * 16}, "token"),
    ({"a": "\ud800"}, "lone surrogate"),
    ({"a": json.loads("[" * 64 + "]" * 64)}, "nests deeper"),
])
def test_params_refused_beside_a_token(params, says):
    """The walk of params is skipped only when the line's bytes rule out what it looks for
    (wire_json._plain): a token in the envelope must not let one through in params."""
    line = json.dumps({"id": 3, "method": "ping", "token": TOKEN, "params": params}).encode()
    with pytest.raises(wire_json.Refused) as e:
        wire_json.decode_request(line)
    assert says in e.value.message and e.value.rid == 3


_PIECES = st.sampled_from(["lonca_", "lonca_h_", TOKEN[6:22], "a", "\u00e9", "\ud800", "\\", '"', "[", "{", "x"])
_TEXT = st.lists(_PIECES, max_size=6).map("".join)
_JSON = st.recursive(st.none() | st.integers(-(2**53 - 1), 2**53 - 1) | _TEXT,
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3), max_leaves=12)


@settings(max_examples=400, deadline=None)
@given(params=_JSON, token=st.sampled_from([None, TOKEN, "lonca_h_" + "5a" * 32]), ascii_only=st.booleans())
def test_the_walk_is_skipped_only_when_it_finds_nothing(params, token, ascii_only):
    line = json.dumps({"id": 1, "method": "ping", "token": token, "params": {"p": params}}, ensure_ascii=ascii_only)
    try:
        data = line.encode()
    except UnicodeEncodeError:  # a lone surrogate unescaped: no UTF-8 line holds it
        return
    if wire_json._plain(data, token):
        wire_json._walk({"p": params}, "params")  # what the skipped walk would have found: nothing


def test_what_strict_json_takes():
    req = wire_json.decode_request(json.dumps({"id": 2**53 - 1, "method": "log", "token": TOKEN, "repo": "demo",
                                               "params": {"a": [[["\U0001f600", -(2**53 - 1)]]] * 2}}).encode())
    assert req["params"]["a"][0][0] == ["\U0001f600", -(2**53 - 1)] and req["token"] == TOKEN
    assert wire_json.decode_request(b'{"id": "x", "method": "ping"}')["params"] == {}
    nested = json.loads("[" * 63 + "]" * 63)
    assert wire_json.decode_request(json.dumps({"id": 1, "method": "m", "params": {"a": nested}}).encode())


@pytest.mark.parametrize("req", [
    {"id": 1.5, "method": "ping"}, {"id": True, "method": "ping"}, {"id": "x" * 129, "method": "ping"},
    {"id": TOKEN, "method": "ping"}, {"id": 1, "method": "ping", "jsonrpc": "2.0"},
    {"id": 1, "method": "p" * 65}, {"id": 1, "method": TOKEN}, {"id": 1, "method": "ping", "repo": TOKEN},
    {"id": 1, "method": "ping", "token": 5}, {"id": 1, "method": "ping", "params": []},
    {"id": 1, "method": "ping", "repo": "a b"}, {"id": 1, "method": "ping", "repo": "r" * 65},
])
def test_envelope(req):
    with pytest.raises(wire_json.Refused):
        wire_json.decode_request(json.dumps(req).encode())


def test_answers_always_encode():
    """A lone surrogate that reaches an answer (from git, say) is replaced, never fatal."""
    line = wire_json.dumps({"id": 1, "ok": False, "error": {"code": "not_found", "message": "no file a\ud800b"}})
    assert json.loads(line.decode("utf-8"))["error"]["message"] == "no file a\ufffdb"


# -- the method table, the schemas and docs/decisions.md ---------------------------------------------

def test_every_method_has_one_schema():
    assert set(schemas.SCHEMAS) == set(METHODS) == set(documented())


def test_submit_ops_have_schemas():
    assert set(schemas.SUBMIT_OPS.kinds) == set(human_methods.SUBMIT_OPS)


@pytest.mark.parametrize("method, params, where", [
    ("log", {"from": 2**53 - 1, "limit": 0}, "params.limit"),
    ("log", {}, "params.from"),
    ("change.propose", {"base": "0" * 40, "files": [], "claim": {"edits": [1]}}, "params.claim.edits[0]"),
    ("change.propose", {"base": "0" * 40, "files": [{"path": ".GIT/config"}]}, "params.files[0].path"),
    ("change.propose", {"base": "0" * 40, "files": [{"path": "a/git~1/b"}]}, "params.files[0].path"),
    ("change.propose", {"base": "0" * 40, "files": [{"path": "a/.Git. /b"}]}, "params.files[0].path"),
    ("change.propose", {"base": "HEAD", "files": []}, "params.base"),
    ("lease.acquire", {"items": [{"symbol": "a#b", "kind": "edit", "names": [1]}]}, "params.items[0].names[0]"),
    ("negotiate", {"thread": "t", "to_session": "s", "message": {"type": {}}}, "params.message.type"),
    ("human.submit", {"op": {"op": "repo.init"}, "sig": {}}, "params.op.op"),
    ("human.submit", {"op": {"op": "reject", "target_seq": 1, "reason": 5}, "sig": {}}, "params.op.reason"),
    ("cap.attenuate", {"agent": "a", "scope": {"paths": [""]}, "expires_ms": 1}, "params.scope.paths[0]"),
    ("status", {"x": 1}, "params has no field 'x'"),
])
def test_schema_refusals_name_the_field(method, params, where):
    with pytest.raises(Exception) as e:
        schemas.check(method, params)
    assert e.value.code == "invalid" and where in e.value.message, e.value.message


# -- each class, over the socket of a real worker --------------------------------------------------------

def raw_lines(w, lines: list[bytes]) -> list[dict]:
    """Pipelined on one connection, then a ping: every line answered in order, the connection on."""
    c = connect(w)
    c.sendall(b"".join(line + b"\n" for line in lines) + b'{"id": "end", "method": "ping", "params": {}}\n')
    answers = [read_line(c) for _ in range(len(lines) + 1)]
    assert answers[-1]["id"] == "end" and answers[-1]["ok"]
    return answers[:-1]


def test_connection_killers_are_answered(worker):
    answers = raw_lines(worker, [
        b'{"id": 1, "method": "ping", "params": ' + b"[" * 1000 + b"]" * 1000 + b"}",
        b'{"id": 2, "method": "ping", "params": {"a": "\xff\xfe"}}',
        b'{"id": 3, "method": "whoami", "params": {}, "token": "\\ud800"}',
        b'\xef\xbb\xbf{"id": 4, "method": "ping", "params": {}}',
        b'{"id": 5, "method": "ping", "params": {}, "params": {}}',
    ])
    assert [(a["id"], a["error"]["code"]) for a in answers] == [(0, "invalid"), (0, "invalid"), (3, "invalid"),
                                                                (0, "invalid"), (0, "invalid")]
    assert "Traceback" not in worker.output.read_text()


def entry_count(env) -> tuple[int, str]:
    s = env.status()
    return s["next_seq"], s["head_hash"]


def test_bad_params_answer_invalid_and_log_nothing(repo_env):
    env = repo_env
    agent = env.agent("edge")
    token = agent["token"]
    before = entry_count(env)
    line = lambda rid, method, params, tok=token: json.dumps(
        {"id": rid, "method": method, "params": params, "token": tok, "repo": "demo"}).encode()
    answers = raw_lines(env.w, [
        line(1, "lease.release", {"set": token}),
        line(2, "negotiate", {"thread": "t", "to_session": env.token, "message": {"type": "accept"}}),
        line(3, "log", {"from": 2**63}, env.token),
        line(4, "log", {"from": 0}, env.token),
        line(5, "change.propose", {"base": env.trunk, "files": [{"path": "app.py", "content_b64": b64("x = 1\n")}],
                                   "claim": {"edits": [1.5]}}),
        line(6, "change.propose", {"base": env.trunk, "files": [{"path": ".GIT/config", "content_b64": b64("x")}]}),
        line(7, "facts.preview", {"base": env.trunk, "files": [{"path": "a/git~1", "content_b64": b64("x")}]}),
        line(8, "lease.acquire", {"items": [{"symbol": "app.py#charge", "kind": "edit"}], "intent": "x\ud800"}),
        line(9, "cap.attenuate", {"agent": "\ud800", "scope": {"paths": ["**"]}, "expires_ms": 1}),
        line(10, "human.login", {"sig": {"human": "alice\udfff", "nonce": "n" * 16, "issued_ms": 1, "sig": "00"}}),
        line(11, "lease.renew", {"set": "fuzz", "ttl_ms": 1e3}),
        line(12, "change.propose", {"base": env.trunk, "files": [{"path": "app.py", "content_b64": None}],
                                    "claim": {"deletes": [{"a": 1}]}}),
        line(13, "negotiate", {"thread": "t", "to_session": "s", "message": {"type": "yield", "set": ["x"]}}),
    ])
    codes = [(a["id"], a["error"]["code"]) for a in answers]
    assert all(code == "invalid" for _rid, code in codes), codes
    assert [rid for rid, _c in codes] == [1, 2, 0, 4, 0, 6, 7, 8, 9, 10, 0, 12, 13]
    for a in answers:
        assert not re.search(r"lonca_(h_)?[0-9a-f]{16}", a["error"]["message"]), a
    assert entry_count(env) == before
    assert "Traceback" not in env.w.output.read_text()


def test_a_symlink_proposal_has_facts(repo_env):
    """Found by the fuzz test: the facts of a symlink (a file seen whole) failed `internal`."""
    env = repo_env
    token = env.agent("links")["token"]
    res = env.client.call("facts.preview", {"base": env.trunk, "files": [
        {"path": "link", "content_b64": b64("app.py"), "mode": "symlink"}]}, token=token)
    assert res["facts"]["added_files"] == ["link"]


def test_a_kotlin_file_its_grammar_dies_on_has_facts(repo_env):
    """Strings nested past the 1 024 Kotlin's scanner survives (symbols/parsing.py): the worker
    answers with the file seen whole instead of dying in tree-sitter."""
    env = repo_env
    token = env.agent("deep")["token"]
    deep = "val x = " + '"${' * 1100 + "1" + '}"' * 1100 + "\n"
    res = env.client.call("facts.preview", {"base": env.trunk, "files": [
        {"path": "deep.kt", "content_b64": b64(deep)}]}, token=token)
    assert res["facts"]["added_files"] == res["facts"]["unread_files"] == ["deep.kt"]
    [why] = res["syntax_errors"]
    assert why.startswith("deep.kt: may be nested too deep for the kotlin grammar"), why
    assert env.client.call("ping")["protocol"]
    assert "Traceback" not in env.w.output.read_text()
