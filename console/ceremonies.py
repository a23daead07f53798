"""WebAuthn ceremonies of the console: registration options for a new key, and assertions over
the seed's intent or login bytes (the challenge is their SHA-256; DESIGN.md, "WebAuthn")."""
import json
import secrets

from webauthn import generate_registration_options, options_to_json
from webauthn.helpers import bytes_to_base64url
from webauthn.helpers.structs import (AuthenticatorSelectionCriteria, ResidentKeyRequirement,
                                      UserVerificationRequirement)

from lonca import humansig, webauthn
from lonca.protocol import now_ms

from .browser_sessions import Ceremony
from .settings import Settings

TIMEOUT_MS = 120_000


def registration_options(settings: Settings, human: str, own_user_id: bool = False) -> tuple[dict, bytes]:
    """Options for navigator.credentials.create, and the challenge to check the answer against.
    A discoverable credential, so logging in needs no list of credential ids. A key registered
    beside another of the same name (a rotation's new key, a recovery key, a recovery's new key)
    gets a user id of its own: an authenticator overwrites its credential of the same user id,
    and the other key must still sign."""
    challenge = secrets.token_bytes(32)
    user_id = human.encode() + (b"/" + secrets.token_bytes(8) if own_user_id else b"")
    options = generate_registration_options(
        rp_id=settings.rp_id, rp_name="Lonca", user_name=human, user_id=user_id,
        challenge=challenge, timeout=TIMEOUT_MS,
        authenticator_selection=AuthenticatorSelectionCriteria(
            resident_key=ResidentKeyRequirement.REQUIRED, user_verification=UserVerificationRequirement.PREFERRED),
        supported_pub_key_algs=list(webauthn.KEY_ALGS.values()))
    return json.loads(options_to_json(options)), challenge


def request_options(settings: Settings, c: Ceremony, credential_id: str | None, require_uv: bool) -> dict:
    """Options for navigator.credentials.get (PublicKeyCredential.parseRequestOptionsFromJSON)."""
    return {
        "challenge": bytes_to_base64url(webauthn.challenge(c.message)),
        "rpId": settings.rp_id,
        "timeout": TIMEOUT_MS,
        "userVerification": "required" if require_uv else "preferred",
        "allowCredentials": [{"type": "public-key", "id": credential_id}] if credential_id else [],
    }


def for_op(kind: str, repo: str, human: str, op: dict, summary: str) -> Ceremony:
    nonce, issued = secrets.token_hex(16), now_ms()
    return Ceremony(id=secrets.token_urlsafe(16), kind=kind, repo=repo, human=human, nonce=nonce, issued_ms=issued,
                    message=humansig.intent_bytes(repo, op, nonce, issued), op=op, summary=summary)


def for_login(human: str, ttl_ms: int) -> Ceremony:
    nonce, issued = secrets.token_hex(16), now_ms()
    return Ceremony(id=secrets.token_urlsafe(16), kind="login", repo=None, human=human, nonce=nonce, issued_ms=issued,
                    message=humansig.login_bytes(None, human, ttl_ms, nonce, issued), ttl_ms=ttl_ms,
                    summary=f"log in as {human}")


def human_signature(c: Ceremony, credential: dict) -> dict:
    """The seed's human signature from `credential.toJSON()` of an assertion."""
    try:
        r = credential["response"]
        sig = webauthn.encode_sig(r["authenticatorData"], r["clientDataJSON"], r["signature"])
    except (KeyError, TypeError, ValueError):
        raise ValueError("the browser's answer is not a WebAuthn assertion") from None
    return {"human": c.human, "nonce": c.nonce, "issued_ms": c.issued_ms, "sig": sig}
