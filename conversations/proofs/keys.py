"""The server's Ed25519 signing key: made on first start, or given by a setting; rotated.

Where the private key lives:

- MEMORYUI_SIGNING_KEY_FILE set: that file, a PEM (PKCS#8) Ed25519 private key. The
  operator owns it; rotating means pointing the setting at a new file.
- otherwise `<data folder>/signing/current.pem`, made on first start with mode 0600
  in a 0700 folder. `manage.py rotate_signing_key` replaces it with a new key and
  destroys the old private half.

Every public key that ever signed is kept in the database (SigningKey) and served
by the API and the admin page, so a head signed before a rotation still verifies
with the key that signed it. A key's id is the first 16 hex digits of SHA-256 over
its 32 raw public bytes, so anyone can recompute it from the public key alone.
"""

import base64
import hashlib
import logging
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import IntegrityError, transaction
from django.utils import timezone

from conversations.errors import StoreError

from .models import SigningKey

log = logging.getLogger("memoryui.proofs")

FILE_MODE = 0o600
DIR_MODE = 0o700


class SigningUnavailable(StoreError):
    """The signing key cannot be used (the setting names a missing or wrong file): a 503 that says why."""

    code = "signing_unavailable"
    status = 503


@dataclass(frozen=True)
class LoadedKey:
    key_id: str
    private: Ed25519PrivateKey
    public_b64: str
    source: str

    def sign(self, message: bytes) -> str:
        return base64.b64encode(self.private.sign(message)).decode("ascii")


def key_id_of(public_raw: bytes) -> str:
    return hashlib.sha256(public_raw).hexdigest()[:16]


def public_raw(private: Ed25519PrivateKey) -> bytes:
    return private.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def setting_path() -> Path | None:
    value = settings.MEMORYUI_SIGNING_KEY_FILE or ""
    return Path(value) if str(value).strip() else None


def key_dir() -> Path:
    return Path(settings.DATA_DIR) / "signing"


def default_path() -> Path:
    return key_dir() / "current.pem"


def _pem(private: Ed25519PrivateKey) -> bytes:
    return private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.NoEncryption())


def _write_new(path: Path, private: Ed25519PrivateKey) -> Path:
    """Write the key to a fresh file 0600 beside `path` (never world-readable, not even briefly)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
    with os.fdopen(fd, "wb") as f:
        f.write(_pem(private))
        f.flush()
        os.fsync(f.fileno())
    return tmp


def ensure_default_key() -> None:
    """Make the data-folder key if there is none and no setting names another one.

    Several server processes may start at once: each writes its own temporary file and
    links it into place; the first link wins and the others discard theirs."""
    if setting_path() is not None or default_path().exists():
        return
    key_dir().mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    os.chmod(key_dir(), DIR_MODE)
    tmp = _write_new(default_path(), Ed25519PrivateKey.generate())
    try:
        os.link(tmp, default_path())
    except FileExistsError:
        pass
    finally:
        tmp.unlink()


def _load_file(path: Path, source: str) -> LoadedKey:
    try:
        data = path.read_bytes()
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError as exc:
        raise SigningUnavailable(f"signing key {path} cannot be read: {exc.strerror}") from None
    if mode & 0o077:
        log.warning("signing key %s is mode %o: others on this machine can read it and sign as the server "
                    "(chmod 600 it)", path, mode)
    try:
        private = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningUnavailable(f"signing key {path} is not an unencrypted PEM private key: {exc}") from None
    if not isinstance(private, Ed25519PrivateKey):
        raise SigningUnavailable(f"signing key {path} is not an Ed25519 key")
    raw = public_raw(private)
    return LoadedKey(key_id=key_id_of(raw), private=private, public_b64=base64.b64encode(raw).decode("ascii"),
                     source=source)


def load_active() -> LoadedKey:
    """The key this server signs with (read from its file each time: a rotation by another
    process, or a changed setting, takes effect at once)."""
    path = setting_path()
    if path is not None:
        return _load_file(path, "setting")
    ensure_default_key()
    return _load_file(default_path(), "data_dir")


def register(key: LoadedKey):
    """The key's public half in the database (once), so that heads signed with it verify later."""
    found = SigningKey.objects.filter(pk=key.key_id).first()
    if found is not None:
        return found
    try:
        with transaction.atomic():
            return SigningKey.objects.create(key_id=key.key_id, public_key=key.public_b64, source=key.source)
    except IntegrityError:  # another process registered it meanwhile
        return SigningKey.objects.get(pk=key.key_id)


def active_key() -> LoadedKey:
    key = load_active()
    register(key)
    return key


def rotate() -> tuple[str, str]:
    """Replace the data-folder key with a new one; the old public key stays on record
    (retired), the old private key is destroyed. Returns (old id, new id)."""
    if setting_path() is not None:
        raise ImproperlyConfigured(
            "the signing key is given by MEMORYUI_SIGNING_KEY_FILE: rotate it by pointing the setting at a new "
            "key file (the old public key stays on record once it has signed)")
    old = active_key()
    new_private = Ed25519PrivateKey.generate()
    raw = public_raw(new_private)
    new = LoadedKey(key_id=key_id_of(raw), private=new_private, public_b64=base64.b64encode(raw).decode("ascii"),
                    source="data_dir")
    # The new public key is on record before the new private key signs anything.
    register(new)
    tmp = _write_new(default_path(), new_private)
    os.replace(tmp, default_path())
    SigningKey.objects.filter(pk=old.key_id, retired_at__isnull=True).update(retired_at=timezone.now())
    return old.key_id, new.key_id


def verify(public_b64: str, message: bytes, signature_b64: str) -> bool:
    try:
        public = Ed25519PublicKey.from_public_bytes(base64.b64decode(public_b64, validate=True))
        public.verify(base64.b64decode(signature_b64, validate=True), message)
    except (InvalidSignature, ValueError):
        return False
    return True
