"""The key lifecycle from the console's buttons (issue 14), in real Chromium with the virtual
authenticator, each one signed operation through human.submit, checked over the socket and by
`lonca audit verify`:

- Keys, "Replace my key with a new passkey": a new credential is registered and the old one signs
  one human.rotate; every session of the old key ends (this browser's and another browser's
  logged in with a copy of it), the old credential is refused at login, the new one logs in.
- Keys, "Set a recovery key": the public part of a file key made by the CLI; the same key twice
  is refused with the worker's code; the CLI's `lonca human recover` then uses it, and the
  browser's session of the key it replaced ends.
- Keys, "Rotate the worker's daemon key": daemon.prepare_rotate, then a signed daemon.rotate;
  ping and status name the new key, entries after it are signed with it.
- Repositories: a restored log on another daemon key (foreign) is offered for daemon.recover;
  after the click it is listed, writable, and on this worker's key.
axe-core finds nothing serious on the pages the buttons are on."""
import base64
import re
import shutil

from playwright.sync_api import expect
from webauthn.helpers import base64url_to_bytes

from conftest import git_repo
from console.browser_steps import bootstrap, login, sign
from console.test_accessibility import HEADERS, VIEWPORTS, axe_source, violations  # noqa: F401 (a fixture)
from console.test_webauthn_console import token_of
from lonca.audit import daemon_sig_ok
from lonca.humansig import fingerprint
from lonca.webauthn import credential
from test_backup_restore import fresh_worker


def no_violations(page, console, path: str, source: str) -> None:
    for vp in VIEWPORTS:
        page.set_viewport_size(vp)
        page.goto(console.url + path)
        assert violations(page, source) == [], (path, vp)
        shown = page.evaluate(HEADERS)
        assert shown["bad"] == [] and not shown["page_scrolls"], (path, vp, shown)
    page.set_viewport_size(VIEWPORTS[0])


def done(page, form: str, **fields) -> str:
    """Submit a form and return its result once all its steps are done (the button is enabled
    again): for a form that registers a key and then signs, not the registration's message."""
    f = page.locator(form)
    for name, value in fields.items():
        f.locator(f"[name={name}]").fill(value)
    button = f.locator("button[type=submit]")
    button.click()
    expect(button).to_be_enabled()
    return f.locator("[data-ceremony-result]").inner_text()


def agent_token(page, console) -> str:
    """A session started on the Sessions page: an agent's token, to read over the socket."""
    page.goto(console.url + "/r/demo/sessions")
    return token_of(sign(page, "form[data-ceremony='session.start']", agent="ada", task="read the log"))


def last_entries(worker, token: str, n: int = 3) -> list[dict]:
    with worker.client() as c:
        head = c.call("status", {"lists": []}, token=token)["next_seq"]
        return c.call("log", {"from": max(1, head - n)}, token=token)


def test_rotate_my_key_and_set_a_recovery_key_from_the_keys_page(stack, new_page, axe_source):  # noqa: F811
    worker, console = stack
    page, key = new_page()
    bootstrap(page, console, "alice", "demo")
    old = key.credentials()[0]

    # a second browser logged in with a copy of the same credential: a second session of the key
    other, other_key = new_page()
    other_key.cdp.send("WebAuthn.addCredential", {"authenticatorId": other_key.id, "credential": old})
    login(other, console, "alice")
    other.wait_for_url(re.compile(r"/r/demo/review$"))
    key.set_sign_count(old["signCount"] + 100)  # ahead of the copy's count, as one device

    no_violations(page, console, "/keys", axe_source)
    result = done(page, "#rotate-key")
    assert re.search(r"replace your key in demo with the new passkey \(fingerprint [^)]+\): allow \(seq \d+\); "
                     r"2 session\(s\) of the old key ended, this one too", result), result
    expect(page.locator("#rotate-key a[href='/login?human=alice']")).to_have_text("Log in with the new passkey")
    new = next(c for c in key.credentials() if c["credentialId"] != old["credentialId"])

    # both sessions of the old key ended: each browser is sent to log in
    for p in (page, other):
        p.goto(console.url + "/keys")
        expect(p).to_have_url(re.compile(r"/login"))
    # the old credential (all the other browser holds) is refused; the new one logs in
    login(other, console, "alice")
    expect(other.locator("#login [data-ceremony-result]")).to_have_class(re.compile(r"\berror\b"))
    expect(other.locator("#login [data-ceremony-result]")).to_contain_text("unauthenticated")
    key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": old["credentialId"]})
    login(page, console, "alice")
    page.wait_for_url(re.compile(r"/r/demo/review$"))

    agent = agent_token(page, console)
    rotate = next(e["entry"] for e in last_entries(worker, agent, 4) if e["entry"]["op"]["op"] == "human.rotate")
    assert rotate["human"]["human"] == "alice" and rotate["decision"]["outcome"] == "allow"
    assert base64url_to_bytes(credential(rotate["op"]["key"]).credential_id) == base64.b64decode(new["credentialId"])
    with worker.client() as c:
        enrolled = c.call("status", {"lists": []}, token=agent)["humans"]["alice"]
    assert {"alg": enrolled["alg"], "public": enrolled["public"]} == rotate["op"]["key"]

    # a recovery key: a file key the CLI makes; the console sees its public part only
    public = worker.cli_json("human", "key", "--human", "alice-recovery")["public"]
    page.goto(console.url + "/keys")
    result = sign(page, "#recovery-key", public=f"ed25519:{public}")
    assert f"set the recovery key of alice in demo (fingerprint {fingerprint({'alg': 'ed25519', 'public': public})}): allow" \
        in result, result
    expect(page.locator("tr[data-repo=demo]")).to_contain_text("a recovery key is set")
    with worker.client() as c:
        assert c.call("status", {"lists": []}, token=agent)["humans"]["alice"]["recovery"] == public
    # the same key again: the worker's refusal, with its code and what to do
    page.goto(console.url + "/keys")
    again = sign(page, "#recovery-key", public=f"ed25519:{public}")
    assert again.startswith("invalid: this key is enrolled in demo already") and "use a new one" in again, again

    # the passkey is lost: the recovery key, from the CLI, moves alice to a new file key
    recovered = worker.cli("human", "recover", "--repo", "demo", "--recovery-key",
                           str(worker.tmp / "humans" / "alice-recovery.key"), "--json")
    assert recovered.returncode == 0, recovered.stderr
    page.goto(console.url + "/keys")  # the passkey's session ended with it
    expect(page).to_have_url(re.compile(r"/login"))
    assert worker.cli("audit", "verify").returncode == 0


def test_a_rotation_is_one_repository_and_the_old_key_still_signs_in_the_others(stack, new_page):
    """alice's passkey is in demo and tools; she rotates it in demo: the console says tools still
    takes the old key; logged in with it, she sees tools only and demo refuses it; rotated there
    too, the old key logs in nowhere."""
    worker, console = stack
    page, key = new_page()
    bootstrap(page, console, "alice", "demo")
    old = key.credentials()[0]
    page.goto(console.url + "/repos")
    page.fill("#new-repo-name", "tools")
    page.click("#new-repo button[type=submit]")
    page.wait_for_url(re.compile(r"/r/tools/review$"))

    page.goto(console.url + "/keys")
    page.select_option("#rotate-repo", "demo")
    result = done(page, "#rotate-key")
    assert re.search(r"replace your key in demo with the new passkey .*: allow .* The old key still signs in tools: log in "
                     r"with it and replace it there too\.", result), result
    first = next(c for c in key.credentials() if c["credentialId"] != old["credentialId"])
    key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": first["credentialId"]})

    login(page, console, "alice")  # the old key: enrolled in tools only now
    page.wait_for_url(re.compile(r"/r/tools/review$"))
    page.goto(console.url + "/keys")
    expect(page.locator(".keys tbody tr")).to_have_count(1)
    expect(page.locator(".keys tr[data-repo=tools]")).to_have_count(1)
    refused = page.goto(console.url + "/r/demo/review")
    assert refused.status == 403 and "forbidden: alice is not enrolled in demo with this key" in page.content()

    page.goto(console.url + "/keys")
    result = done(page, "#rotate-key")
    assert "replace your key in tools with the new passkey" in result and ": allow" in result and "still signs" not in result, result
    second = next(c for c in key.credentials() if c["credentialId"] not in (old["credentialId"], first["credentialId"]))
    key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": second["credentialId"]})
    login(page, console, "alice")
    expect(page.locator("#login [data-ceremony-result]")).to_contain_text("unauthenticated")
    assert worker.cli("audit", "verify").returncode == 0


def test_rotate_the_daemon_key_from_the_keys_page(stack, new_page):
    worker, console = stack
    page, _ = new_page()
    bootstrap(page, console, "alice", "demo")
    with worker.client() as c:
        before = c.call("ping")["daemon_key"]
    page.goto(console.url + "/keys")
    expect(page.locator("tr[data-repo=demo] td.daemon-key")).to_contain_text(before[:16])
    result = sign(page, "#rotate-daemon-key")
    m = re.search(r"move the log of demo to the worker's next daemon key ([0-9a-f]{16})…: allow \(seq (\d+)\)", result)
    assert m, result
    with worker.client() as c:
        pong = c.call("ping")
    # the only repository moved: the next key became the key, and no rotation is under way
    assert pong["daemon_key"].startswith(m.group(1)) and pong["daemon_key"] != before and pong["next_key"] is None
    # the form reloads the page
    expect(page.locator("tr[data-repo=demo] td.daemon-key")).to_contain_text(pong["daemon_key"][:16])

    agent = agent_token(page, console)  # an entry after the rotation
    with worker.client() as c:
        assert c.call("status", {"lists": []}, token=agent)["daemon_key"] == pong["daemon_key"]
        log = c.call("log", {"from": int(m.group(2))}, token=agent)
    assert log[0]["entry"]["op"] == {"op": "daemon.rotate", "key": pong["daemon_key"]}
    assert daemon_sig_ok(before, log[0]["hash"], log[0]["sig"])  # the rotation itself: the old key
    assert len(log) >= 2 and all(daemon_sig_ok(pong["daemon_key"], e["hash"], e["sig"]) for e in log[1:])
    assert worker.cli("audit", "verify").returncode == 0


def carried_away(make_worker, make_console, page, key, tmp_path, recovery: bool = False) -> tuple:
    """alice's `demo` on worker a (with a recovery security key set from Keys, if asked, and
    taken off the authenticator), backed up from the Forge page; a stops; worker b, with a daemon
    key of its own, restores the backup, foreign; a console for b on a's origin (a passkey is
    bound to its origin). (b, its console, a's daemon key, the last seq backed up, the recovery
    credential or None); the caller stops b."""
    a = make_worker()
    console = make_console(a)
    bootstrap(page, console, "alice", "demo", import_from=str(git_repo(tmp_path / "src", {"app.py": "def f():\n    return 1\n"})))
    kept = None
    if recovery:
        main = key.credentials()[0]
        page.goto(console.url + "/keys")
        assert ": allow" in done(page, "#recovery-passkey")
        kept = next(c for c in key.credentials() if c["credentialId"] != main["credentialId"])
        key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": kept["credentialId"]})
    page.goto(console.url + "/r/demo/forge")
    written = done(page, "#backup")
    m = re.search(r"written to (\S+) \(log up to seq (\d+)\)", written)
    bundle = tmp_path / "carried.bundle"
    shutil.copy(m.group(1), bundle)
    old_key = a.client().call("ping")["daemon_key"]
    console.stop()
    a.stop()
    b = fresh_worker(tmp_path, "b", str(tmp_path / "humans"))
    restored = b.cli_json("restore", "demo", "--from", str(bundle))
    assert restored["foreign"] is True and restored["daemon_key"] == old_key
    return b, make_console(b, port=console.port), old_key, int(m.group(2)), kept


def adopted(b, page, console, backed_up_to: int, own: str) -> tuple[dict, dict]:
    """demo is writable again on b's key `own`: a session starts, every entry from the recovery
    on is signed with that key, and the log verifies offline. (the recovery's entry, status)"""
    agent = agent_token(page, console)
    with b.client() as c:
        st = c.call("status", {"lists": []}, token=agent)
        log = c.call("log", {"from": backed_up_to + 1}, token=agent)
    assert st["foreign"] is False and st["daemon_key"] == own
    assert log[0]["entry"]["human"]["human"] == "alice" and log[0]["entry"]["decision"]["outcome"] == "allow"
    assert log[1]["entry"]["op"]["op"] == "session.start" and log[1]["entry"]["decision"]["outcome"] == "allow"
    assert all(daemon_sig_ok(own, e["hash"], e["sig"]) for e in log)
    assert b.cli("audit", "verify").returncode == 0
    return log[0]["entry"], st


def test_adopt_a_restored_foreign_log_from_the_repositories_page(make_worker, make_console, new_page, tmp_path,
                                                                 axe_source):  # noqa: F811
    page, key = new_page()
    b, console, old_key, backed_up_to, _ = carried_away(make_worker, make_console, page, key, tmp_path)
    try:
        own = b.client().call("ping")["daemon_key"]
        login(page, console, "alice")
        page.wait_for_url(re.compile(r"/repos$"))  # no repository listed yet: it waits
        offer = page.locator("[data-foreign=demo]")
        expect(offer).to_contain_text(old_key[:16])
        expect(page.locator("section.repo[data-repo=demo]")).to_have_count(0)
        no_violations(page, console, "/repos", axe_source)

        result = done(page, "[data-foreign=demo] form.recover-daemon")
        assert f"adopt the restored log of demo with this worker's daemon key {own[:16]}…: allow (seq {backed_up_to + 1})" \
            in result, result
        expect(page.locator("section.repo[data-repo=demo]")).to_have_count(1)  # the form reloads the page
        expect(page.locator("[data-foreign]")).to_have_count(0)
        entry, _ = adopted(b, page, console, backed_up_to, own)
        assert entry["op"] == {"op": "daemon.recover", "key": own}
    finally:
        b.stop()


def test_the_recovery_key_adopts_a_foreign_log_and_recovers_my_name(make_worker, make_console, new_page, tmp_path):
    """The machine is lost with the passkey: on the new worker, /recover registers a new passkey
    and the recovery security key signs one daemon.recover with recover, no login."""
    page, key = new_page()
    b, console, _, backed_up_to, recovery = carried_away(make_worker, make_console, page, key, tmp_path, recovery=True)
    try:
        own = b.client().call("ping")["daemon_key"]
        lost = key.credentials()[0]
        key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": lost["credentialId"]})
        page.goto(console.url + "/recover")
        assert "now sign its recovery" in done(page, "#recover-register", human="alice")
        new = key.credentials()[0]
        key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": new["credentialId"]})
        key.cdp.send("WebAuthn.addCredential", {"authenticatorId": key.id, "credential": recovery})
        # a human.recover alone: the worker's code, and the box that says what to do
        refused = done(page, "#recover-sign", repo="demo")
        assert refused.startswith("foreign_key: demo's log is on daemon key") and "daemon.recover" in refused, refused
        page.check("#recover-sign [name=daemon]")
        result = done(page, "#recover-sign", repo="demo")
        assert re.search(rf"adopt the restored log of demo with this worker's daemon key {own[:16]}… and recover alice in "
                         rf"demo with the new passkey \(fingerprint [^)]+\): allow \(seq {backed_up_to + 1}\)", result), result

        key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": recovery["credentialId"]})
        key.cdp.send("WebAuthn.addCredential", {"authenticatorId": key.id, "credential": new})
        login(page, console, "alice")
        page.wait_for_url(re.compile(r"/r/demo/review$"))  # listed: on this worker's key now
        entry, st = adopted(b, page, console, backed_up_to, own)
        now = {"alg": st["humans"]["alice"]["alg"], "public": st["humans"]["alice"]["public"]}
        assert entry["op"] == {"op": "daemon.recover", "key": own, "recover": {"human": "alice", "key": now}}
        assert entry["actor"] == {"kind": "human", "name": "alice"} and st["humans"]["alice"]["recovery"] is None
        assert base64url_to_bytes(credential(now).credential_id) == base64.b64decode(new["credentialId"])
    finally:
        b.stop()


def test_a_recovery_security_key_recovers_my_name_on_the_recover_page(stack, new_page, axe_source):  # noqa: F811
    """A second security key is set as the recovery key from Keys and put away; the passkey is
    lost; on another browser, /recover registers a new passkey and the recovery key signs the
    human.recover, with no login. The lost key's session ends, the new passkey logs in, and the
    recovery key, spent, signs nothing more."""
    worker, console = stack
    page, key = new_page()
    bootstrap(page, console, "alice", "demo")
    main = key.credentials()[0]
    page.goto(console.url + "/keys")
    result = done(page, "#recovery-passkey")
    assert re.search(r"set the recovery key of alice in demo \(fingerprint [^)]+\): allow \(seq \d+\)", result), result
    expect(page.locator("tr[data-repo=demo]")).to_contain_text("a recovery key is set")  # the form reloads the page
    # the recovery key goes into a drawer: off this authenticator
    recovery = next(c for c in key.credentials() if c["credentialId"] != main["credentialId"])
    key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": key.id, "credentialId": recovery["credentialId"]})

    # the passkey is lost; another browser, no login
    other, other_key = new_page()
    other.goto(console.url + "/login")
    other.click("a[href='/recover']")
    no_violations(other, console, "/recover", axe_source)
    registered = done(other, "#recover-register", human="alice")
    assert "now sign its recovery with your recovery key" in registered, registered
    new = other_key.credentials()[0]
    # the new passkey's device is put aside and the recovery key plugged in (the only one the
    # browser can reach, as a human holding one key at a time)
    other_key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": other_key.id, "credentialId": new["credentialId"]})
    other_key.cdp.send("WebAuthn.addCredential", {"authenticatorId": other_key.id, "credential": recovery})
    result = done(other, "#recover-sign", repo="demo")
    assert re.search(r"recover alice in demo with the new passkey \(fingerprint [^)]+\): allow \(seq \d+\); 1 session\(s\) "
                     r"of the lost key ended\. The recovery key is spent", result), result
    # spent: the same recovery key signs no second recovery
    again = done(other, "#recover-sign", repo="demo")
    assert again.startswith("register the new passkey first"), again  # one registration, one recovery
    done(other, "#recover-register", human="alice")
    for c in other_key.credentials():
        if c["credentialId"] != recovery["credentialId"]:
            other_key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": other_key.id, "credentialId": c["credentialId"]})
    refused = done(other, "#recover-sign", repo="demo")
    assert refused.startswith("denied: not_enrolled: alice has no recovery key in demo"), refused

    page.goto(console.url + "/keys")  # the lost key's session ended
    expect(page).to_have_url(re.compile(r"/login"))
    other_key.cdp.send("WebAuthn.removeCredential", {"authenticatorId": other_key.id, "credentialId": recovery["credentialId"]})
    other_key.cdp.send("WebAuthn.addCredential", {"authenticatorId": other_key.id, "credential": new})
    login(other, console, "alice")
    other.wait_for_url(re.compile(r"/r/demo/review$"))
    agent = agent_token(other, console)
    recover = next(e["entry"] for e in last_entries(worker, agent, 4) if e["entry"]["op"]["op"] == "human.recover")
    assert recover["actor"] == {"kind": "human", "name": "alice"}
    assert base64url_to_bytes(credential(recover["op"]["key"]).credential_id) == base64.b64decode(new["credentialId"])
    with worker.client() as c:
        enrolled = c.call("status", {"lists": []}, token=agent)["humans"]["alice"]
    assert {"alg": enrolled["alg"], "public": enrolled["public"]} == recover["op"]["key"] and enrolled["recovery"] is None
    assert worker.cli("audit", "verify").returncode == 0
