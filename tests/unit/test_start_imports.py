"""The worker's start imports what it starts with: py_webauthn (about 0.25 s) only once a WebAuthn
assertion or key is parsed (docs/decisions.md, "The worker's start imports what it uses")."""
import subprocess
import sys


def test_importing_the_worker_leaves_py_webauthn_unloaded():
    code = ("import sys, lonca.service.daemon; from lonca import webauthn; "
            "assert webauthn.KEY_ALGS; print(sorted(m for m in sys.modules if m.split('.')[0] == 'webauthn'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_the_algorithm_ids_are_py_webauthns():
    from webauthn.helpers.cose import COSEAlgorithmIdentifier

    from lonca import webauthn
    assert webauthn.KEY_ALGS == {"webauthn-ed25519": COSEAlgorithmIdentifier.EDDSA,
                                 "webauthn-es256": COSEAlgorithmIdentifier.ECDSA_SHA_256,
                                 "webauthn-rs256": COSEAlgorithmIdentifier.RSASSA_PKCS1_v1_5_SHA_256}
