"""Where things live on disk, from the environment (seed 001, "Wire format", human session file)."""
import os
from pathlib import Path


def lonca_home() -> Path:
    return Path(os.environ.get("LONCA_HOME") or Path.home() / ".lonca")


def socket_path() -> Path:
    return Path(os.environ.get("LONCA_SOCKET") or lonca_home() / "lonca.sock")


def humans_dir() -> Path:
    return Path(os.environ.get("LONCA_HUMANS") or Path.home() / ".config" / "lonca" / "humans")


def database_url() -> str:
    return os.environ.get("LONCA_DATABASE_URL") or f"sqlite:///{lonca_home() / 'lonca.db'}"
